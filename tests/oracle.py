"""The oracle: the design's invariants checked on what a play left in the database, against what the simulated
Gateway did. It lives here, not in owc: an oracle must not share the code it judges, so it derives everything
again on its own (the identity rule, which runs showed something, their cards and texts) from the simulator's
runs and transcripts, never from owc's renderer, finalizer or ids module.

Invariants (shared/design.md): every run on a chat's key that showed something (a tool call, or text that is not
a silent sentinel) has exactly one message, whose id follows from the run id, finished once the run has ended,
with every tool card of its transcript and every text it said; no message for a heartbeat, an ``owui-action-``
run, or a run that said only a sentinel; one message per run; no sibling variants.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

NS = uuid.UUID("4fb14312-7485-5b8b-b791-6367042b3765")  # NOTES.md, "Identity rule": fixed forever
SILENT = {"NO_REPLY", "ANNOUNCE_SKIP", "HEARTBEAT_OK"}
_KEY = re.compile(
    r"^agent:[^:]+:openwebui-(?P<user>[^:]+)-(?P<chat>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$"
)
_PIPE_RUN = re.compile(r"^msg-(?P<chat>[0-9a-f-]{36})-(?P<message>[0-9a-f-]{36})-.+$")


def expected_message_id(key: str, run_id: str) -> str | None:
    if run_id.startswith("owui-action-"):
        return None
    pipe = _PIPE_RUN.match(run_id)
    if pipe:
        return pipe["message"]
    return str(uuid.uuid5(NS, f"{key}:{run_id}"))


def chat_of(key: str) -> str | None:
    m = _KEY.match(key)
    return m["chat"] if m else None


def _run_messages(transcript: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    out = []
    for message in transcript:
        meta = message.get("__openclaw") or {}
        keys = {meta.get("runId"), message.get("idempotencyKey"), meta.get("idempotencyKey")}
        if message.get("role") == "assistant" and ({run_id, f"cli-assistant:{run_id}", f"{run_id}:assistant"} & keys):
            out.append(message)
        elif message.get("role") == "toolResult" and meta.get("runId") == run_id:
            out.append(message)
    return out


def _parts(messages: list[dict[str, Any]]) -> tuple[list[str], int]:
    texts: list[str] = []
    calls = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue  # a tool's result is a card's output, not the run's text
        content = message.get("content")
        for part in content if isinstance(content, list) else [{"type": "text", "text": content or ""}]:
            if part.get("type") == "toolCall":
                calls += 1
            elif part.get("type") == "text":
                # An aborted partial holds the run-wide buffer (earlier items joined by blank lines): each
                # item is a text of its own.
                for piece in str(part.get("text") or "").split("\n\n"):
                    if piece.strip() and piece.strip() not in SILENT:
                        texts.append(piece.strip())
    return texts, calls


def check(sim: Any, chats: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
    """``chats``: chat id -> (a name for messages, the chat's ``history.messages``). Returns the violations."""
    problems: list[str] = []
    by_chat_run: dict[tuple[str, str], list[str]] = {}
    for chat_id, (name, messages) in chats.items():
        for mid, message in messages.items():
            run = (message.get("meta") or {}).get("openclaw_run")
            if run:
                by_chat_run.setdefault((chat_id, run), []).append(mid)
            if len(message.get("childrenIds") or []) > 1:
                problems.append(f"{name}: message {mid} has {len(message['childrenIds'])} children (a sibling variant)")
    for (chat_id, run_id), mids in by_chat_run.items():
        if len(mids) > 1:
            problems.append(f"{chats[chat_id][0]}: run {run_id} has {len(mids)} messages")
    for run in sim.runs.values():
        chat_id = chat_of(run.key)
        if chat_id is None or chat_id not in chats:
            continue
        name, messages = chats[chat_id]
        session = sim.sessions.get(run.key)
        transcript = session.transcript if session is not None else []
        texts, calls = _parts(_run_messages(transcript, run.run_id))
        mid = expected_message_id(run.key, run.run_id)
        # A run cut by a crash persisted nothing of what it showed live: a message is allowed for that (owc may
        # have streamed it), not required (owc may have been away: nobody can show what nobody kept).
        live = [p.strip() for p in run.text.split("\n\n") if p.strip() and p.strip() not in SILENT]
        shows = (calls > 0 or bool(texts)) and not run.heartbeat and mid is not None
        may_show = (shows or bool(live)) and not run.heartbeat and mid is not None
        owned = mid is not None and (messages.get(mid, {}).get("meta") or {}).get("openclaw_run") == run.run_id
        if not shows:
            if owned and not may_show:
                problems.append(f"{name}: run {run.run_id} showed nothing (or never may) and has message {mid}")
            if not owned:
                continue
        message = messages.get(mid)
        if message is None:
            problems.append(
                f"{name}: run {run.run_id} showed something ({calls} tool calls, {len(texts)} texts)"
                f" and has no message {mid}"
            )
            continue
        if run.state != "ended":
            continue
        if message.get("done") is not True:
            problems.append(f"{name}: run {run.run_id} has ended and its message {mid} is not done")
            continue
        cards = sum(1 for item in message.get("output") or [] if item.get("type") == "function_call")
        if cards != calls:
            problems.append(f"{name}: run {run.run_id}'s message has {cards} tool cards, its transcript {calls}")
        content = message.get("content") or ""
        for text in texts:
            if text not in content:
                problems.append(f"{name}: run {run.run_id}'s message lacks its text {text[:60]!r}")
    return problems
