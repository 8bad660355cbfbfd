"""``sessions.compact`` as the real Gateway 2026.9.6 answers it (``docs/measured/status-subagents-2026.9.6.md`` section
3; the handler read in ``sessions-compact-*.mjs``).

``operator.admin`` (``rpc.METHOD_SCOPES``: a read+write connection gets ``FORBIDDEN "missing scope:
operator.admin"``). Params ``{key, agentId?, maxLines?}`` (closed). Answers, in the handler's order:

* no session under the key: ``{ok:true, key, compacted:false, reason:"no sessionId"}``;
* a run active on it: ``INVALID_REQUEST "Session <key> has an active run; retry after it finishes."`` (queued work
  alone: ``"... has queued work; ..."``); the run goes on;
* ``maxLines``: the raw transcript trim, ``{ok:true, key, compacted:true, kept}``; measured, ``chat.history`` then
  shows no messages and the row has ``totalTokensFresh:false`` without ``totalTokens``: the simulator empties the
  transcript, and says only ``sessions.changed {reason:"compact", compacted:true}``;
* nothing to do: ``{ok:false, key, compacted:false, reason}``, no event. The simulator's rule (the real one asks its
  compaction preflight, which the fake model never exercised): **"Already compacted"** when the session was compacted
  and no user or assistant message has been stored since; **"Nothing to compact (session too small)"** when it was
  never compacted and holds fewer than two assistant messages the display shows (one reply is not a conversation to
  summarise; measured: three turns compacted);
* else the compaction: ``session.operation {operation:"compact", phase:"start"}``, the compaction entry stored (the
  ``sessions.changed phase:"message"`` naming it), ``session.operation phase:"end", completed:true``, the answer
  ``{ok:true, key, compacted:true, result:{summary, firstKeptEntryId, tokensBefore, tokensAfter, details}}``, then
  ``sessions.changed {reason:"compact", compacted:true, totalTokens:<after>, totalTokensFresh:true, ...row}``; the
  events go to the ``sessions.subscribe`` connections, all within the request (no time passes: measured 0.15-0.29 s,
  one model call for the summary).

The transcript keeps every visible message and gains the entry ``{role:"system", content:[{text:"Compaction"}],
__openclaw:{kind:"compaction", tokensBefore, tokensAfter, firstKeptEntryId}}`` (measured). Tokens: ``tokensBefore``
is the row's ``totalTokens`` when a test set one (``sim.rpc.session_usage``), else an estimate (1000 plus a quarter of
the transcript's characters, as the fake model's 1000-token prompts); ``tokensAfter`` is 70 % of it (measured 1050 to
732). The row then says ``totalTokens:<after>``, ``totalTokensFresh:true`` and loses ``inputTokens``,
``outputTokens``, ``estimatedCostUsd`` and ``contextBudgetStatus`` (measured); ``compactionCount`` is not in the row
(measured). The next run's end (``RunDriver.end``) puts the row's counters back as the simulator has them (none).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from owc.sim import model as m
from owc.sim.delivery import Fanout, subscribers
from owc.sim.refusals import InvalidParams, Refused
from owc.sim.rpc import opt_int, require_str
from owc.sim.runs import RunDriver

COMPACT_FIELDS = frozenset({"key", "agentId", "maxLines"})
ALREADY = "Already compacted"
TOO_SMALL = "Nothing to compact (session too small)"
#: Fewer shown assistant messages than this and a session never compacted is too small to compact.
MIN_ASSISTANT_TURNS = 2
#: The row's usage fields a compaction removes (measured).
CLEARED_FIELDS = ("inputTokens", "outputTokens", "estimatedCostUsd", "contextBudgetStatus")


class Compactor:
    """``sessions.compact``'s handler. ``defer`` runs a function after the RPC's answer is queued (``Rpc.defer``)."""

    def __init__(
        self,
        fanout: Fanout,
        driver: RunDriver,
        *,
        now_ms: Callable[[], int],
        defer: Callable[[Callable[[], object]], None],
        session_usage: dict[str, dict[str, Any]],
    ) -> None:
        self._fanout = fanout
        self._driver = driver
        self._now_ms = now_ms
        self._defer = defer
        self._usage = session_usage
        #: Compactions done, by key (tests read it; the row does not say it, as measured).
        self.count: dict[str, int] = {}

    def compact(self, conn: Any, params: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(params) - COMPACT_FIELDS)
        if unknown:
            raise InvalidParams(f"at root: unexpected property '{unknown[0]}'")
        key = require_str(params, "key")
        max_lines = opt_int(params, "maxLines", 1)
        session = self._driver.sessions.get(key)
        if session is None:
            return {"ok": True, "key": key, "compacted": False, "reason": "no sessionId"}
        if session.active is not None:
            raise Refused("INVALID_REQUEST", f"Session {key} has an active run; retry after it finishes.")
        if session.queued:
            raise Refused("INVALID_REQUEST", f"Session {key} has queued work; retry after it finishes.")
        if max_lines is not None:
            return self._trim(session, max_lines)
        reason = noop_reason(session)
        if reason is not None:
            return {"ok": False, "key": key, "compacted": False, "reason": reason}
        return self._compact(session)

    def _operation(self, session: m.AgentSession, operation_id: str, phase: str, **extra: Any) -> None:
        payload = {
            "operationId": operation_id, "operation": "compact", "phase": phase, "sessionKey": session.key,
            "agentId": session.agent_id, **extra, "ts": self._now_ms(),
        }  # fmt: skip
        self._fanout.emit("session.operation", payload, audience=subscribers, drop_if_slow=False)

    def _compact(self, session: m.AgentSession) -> dict[str, Any]:
        now = self._now_ms()
        operation_id = str(uuid.uuid4())
        self._operation(session, operation_id, "start")
        before = tokens_before(session, self._usage.get(session.key))
        after = before * 7 // 10
        kept = _first_kept(session)
        summary = _summary(session)
        entry = {
            "role": "system",
            "content": [{"type": "text", "text": "Compaction"}],
            "timestamp": now,
            "__openclaw": {
                "kind": "compaction", "tokensBefore": before, "tokensAfter": after, "firstKeptEntryId": kept,
                "operationId": operation_id,
            },
        }  # fmt: skip
        session.append(entry, now)
        session.compacted_seq = session.transcript_seq
        session.updated_at = now
        self._fanout.hidden_message(session, entry)  # sessions.changed phase:"message" naming the entry
        session.total_tokens, session.tokens_fresh = after, True
        usage = self._usage.get(session.key)
        if usage is not None:
            for field in CLEARED_FIELDS:
                usage.pop(field, None)
            usage.update(totalTokens=after, totalTokensFresh=True)
        self.count[session.key] = self.count.get(session.key, 0) + 1
        self._operation(session, operation_id, "end", completed=True)
        self._defer(lambda: self._changed(session, compacted=True, totalTokens=after, totalTokensFresh=True))
        result = {
            "summary": summary,
            "firstKeptEntryId": kept,
            "tokensBefore": before,
            "tokensAfter": after,
            "details": {"readFiles": [], "modifiedFiles": []},
        }
        return {"ok": True, "key": session.key, "compacted": True, "result": result}

    def _trim(self, session: m.AgentSession, max_lines: int) -> dict[str, Any]:
        kept = min(max_lines, len(session.transcript))
        session.transcript = []
        session.compacted_seq = session.transcript_seq
        session.total_tokens, session.tokens_fresh = None, False
        usage = self._usage.get(session.key)
        if usage is not None:
            for field in (*CLEARED_FIELDS, "totalTokens"):
                usage.pop(field, None)
            usage["totalTokensFresh"] = False
        session.updated_at = self._now_ms()
        self._defer(lambda: self._changed(session, compacted=True))
        return {"ok": True, "key": session.key, "compacted": True, "kept": kept}

    def _changed(self, session: m.AgentSession, **fields: Any) -> None:
        payload = m.sessions_changed_payload(session, self._now_ms(), reason="compact")
        payload.update(fields)
        if "totalTokens" in fields:
            payload["contextBudgetStatus"] = None
        self._fanout.emit("sessions.changed", payload, audience=subscribers, drop_if_slow=True)


def noop_reason(session: m.AgentSession) -> str | None:
    """Why there is nothing to compact (the simulator's rule, in the module's docstring), None when there is."""
    if session.compacted_seq is not None:
        since = [
            msg
            for msg in session.transcript
            if (msg.get("__openclaw") or {}).get("seq", 0) > session.compacted_seq
            and msg.get("role") in ("user", "assistant")
        ]
        return ALREADY if not since else None
    shown = [msg for msg in session.transcript if msg.get("role") == "assistant" and not m.hidden(msg)]
    return TOO_SMALL if len(shown) < MIN_ASSISTANT_TURNS else None


def tokens_before(session: m.AgentSession, usage: dict[str, Any] | None) -> int:
    given = (usage or {}).get("totalTokens")
    if isinstance(given, int) and not isinstance(given, bool) and given > 0:
        return given
    if session.total_tokens is not None:
        return session.total_tokens
    chars = sum(len(m.plain_text(msg) or "") for msg in session.transcript)
    return 1000 + chars // 4


def _first_kept(session: m.AgentSession) -> str | None:
    """The entry the compacted context keeps from: the last user message (the request being worked on)."""
    for msg in reversed(session.transcript):
        if msg.get("role") == "user" and not m.hidden(msg):
            return (msg.get("__openclaw") or {}).get("id")
    return None


def _summary(session: m.AgentSession) -> str:
    users = [m.plain_text(x) or "" for x in session.transcript if x.get("role") == "user" and not m.hidden(x)]
    replies = [x for x in session.transcript if x.get("role") == "assistant" and not m.hidden(x)]
    latest = " ".join(users[-1].split())[:300] if users else "(none)"
    return (
        f"## Latest user request context\n{latest}\n\n## Conversation so far\n"
        f"{len(users)} user messages and {len(replies)} assistant replies."
    )
