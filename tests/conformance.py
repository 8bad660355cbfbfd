"""One interaction, driven the same way against the real Gateway and the simulator, and its normal form.

The interaction (issue 3): handshake; A subscribes without list params, B subscribes with them; A sends a
turn that makes one tool call; B reads ``chat.history``; A sends a slow turn and aborts it after its first
delta; B reads ``chat.history``; A reads ``sessions.list``.

The normal form keeps what owc reads and drops what is timing or noise on the real Gateway (NOTES.md,
"Conformance: documented differences"):

* run stream (``chat``, ``agent``, ``session.tool``): the event kinds owc reads, in order, with text events
  (``agent`` assistant and ``chat`` delta) folded into one ``text`` kind and repeats collapsed. ``agent``
  lifecycle ``model`` / ``finishing`` and ``chat`` ``status`` are left out, and so are text events after
  the lifecycle end: the real Gateway paces deltas and flushes the last one at the end, a timing artefact.
* session stream (``sessions.changed`` for the run's key): lifecycle phases start / end / error and the
  settled row, in order; the debounced ``reason`` pushes (``send``, ``participants``, ``agent.run.started``)
  are left out, and the two streams are compared separately because the real Gateway's debounce moves the
  session pushes relative to the run's events.
* payload key sets: for each kind, the keys owc's parser reads that are present.
"""

from __future__ import annotations

import uuid
from typing import Any

import trio

from owc.protocol import EventFrame, parse_chat_history

from rawclient import RawClient, raw_client

TOOL_MESSAGE = "USE_TOOL please check the status"
SLOW_MESSAGE = "SLOW answer please"
ECHO_MESSAGE = "ECHO_TOOL SLOW answer please"

#: The raw keys owc reads, per normalized kind (what ``owc.protocol`` parses).
READ_KEYS = {
    "chat": {
        "runId",
        "sessionKey",
        "state",
        "seq",
        "deltaText",
        "replace",
        "message",
        "yielded",
        "stopReason",
        "errorMessage",
    },
    "agent": {"runId", "stream", "data", "sessionKey", "seq", "ts", "isHeartbeat"},
    "sessions.changed": {
        "sessionKey",
        "phase",
        "reason",
        "runId",
        "clientRunId",
        "hasActiveRun",
        "activeRunIds",
        "status",
        "abortedLastRun",
        "lastRunId",
        "lastRunError",
        "updatedAt",
    },
    "tool.data": {"phase", "name", "toolCallId", "args", "result", "isError"},
    "item.data": {"itemId", "phase", "kind", "toolCallId", "name", "title", "status"},
    "row": {
        "key",
        "status",
        "hasActiveRun",
        "activeRunIds",
        "abortedLastRun",
        "lastRunId",
        "lastRunError",
        "updatedAt",
        "sessionId",
    },
    "history.message": {
        "role",
        "content",
        "idempotencyKey",
        "toolCallId",
        "toolName",
        "isError",
        "openclawAbort",
        "__openclaw",
    },
}


def _is(event: str, run_id: str, **payload: Any):
    def match(f: EventFrame) -> bool:
        p = f.payload
        return f.event == event and p.get("runId") == run_id and all(p.get(k) == v for k, v in payload.items())

    return match


async def drive(url: str, token: str, *, timeout: float = 180.0) -> dict[str, Any]:
    """Play the interaction; return everything each connection saw, per run."""
    key = f"agent:main:openwebui-conformance-{uuid.uuid4()}"
    r1, r2 = str(uuid.uuid4()), str(uuid.uuid4())
    out: dict[str, Any] = {"key": key, "runs": (r1, r2)}
    with trio.fail_after(timeout):
        async with raw_client(url, token, instance_id="A") as a, raw_client(url, token, caps=(), instance_id="B") as b:
            out["hello"] = a.hello.raw
            out["subscribe_plain"] = (await a.request("sessions.subscribe", {})).payload
            out["subscribe_list"] = (await b.request("sessions.subscribe", {"limit": 5})).payload
            sent = await a.request("chat.send", {"sessionKey": key, "message": TOOL_MESSAGE, "idempotencyKey": r1})
            out["send"] = sent.payload
            end1 = lambda f: _is("sessions.changed", r1, phase="end")(f)  # noqa: E731
            out["tool_turn"] = {"A": await _collect(a, r1, end1), "B": await _collect(b, r1, end1)}
            out["history_tool"] = (await b.request("chat.history", {"sessionKey": key, "limit": 50})).payload
            await a.request("chat.send", {"sessionKey": key, "message": SLOW_MESSAGE, "idempotencyKey": r2})
            before = await a.events_until(_is("chat", r2, state="delta"))
            abort = await a.request("chat.abort", {"sessionKey": key, "runId": r2})
            out["abort"] = abort.payload
            end2 = lambda f: _is("sessions.changed", r2, phase="error")(f)  # noqa: E731
            a_rest = await _collect(a, r2, end2)
            out["abort_turn"] = {
                "A": [f for f in before if _mine(f, key, r2)] + a_rest,
                "B": await _collect(b, r2, end2),
            }
            out["history_abort"] = (await b.request("chat.history", {"sessionKey": key, "limit": 50})).payload
            # Paging: offsets count back from the newest message (what a long run's finalize relies on).
            out["history_pages"] = [
                (
                    await b.request(
                        "chat.history", {"sessionKey": key, "limit": 3, **({"offset": offset} if offset else {})}
                    )
                ).payload
                for offset in (0, 3, 6)
            ]
            out["list"] = (await a.request("sessions.list", {"limit": 5})).payload
    return out


def _chat_text(f: EventFrame) -> str:
    content = (f.payload.get("message") or {}).get("content")
    return "".join(p.get("text", "") for p in content if isinstance(p, dict)) if isinstance(content, list) else ""


async def drive_echo_abort(url: str, token: str, *, timeout: float = 180.0) -> dict[str, Any]:
    """A run whose aborted item starts with an earlier item's text (issue 11): the fake model says ``Hello``,
    calls ``read``, then starts the answer (``Hello from ...``, slowly); A aborts once the chat buffer shows
    ``Hello from`` after the tool, then reads ``chat.history``."""
    key = f"agent:main:openwebui-conformance-{uuid.uuid4()}"
    run_id = str(uuid.uuid4())
    out: dict[str, Any] = {"key": key, "run": run_id}
    with trio.fail_after(timeout):
        async with raw_client(url, token, instance_id="A") as a:
            await a.request("sessions.subscribe", {})
            sent = await a.request("chat.send", {"sessionKey": key, "message": ECHO_MESSAGE, "idempotencyKey": run_id})
            assert sent.ok, sent.error
            before = await a.events_until(
                lambda f: _is("chat", run_id, state="delta")(f) and _chat_text(f).endswith("\n\nHello from")
            )
            out["abort"] = (await a.request("chat.abort", {"sessionKey": key, "runId": run_id})).payload
            rest = await _collect(a, run_id, lambda f: _is("sessions.changed", run_id, phase="error")(f))
            out["frames"] = [f for f in before if _mine(f, key, run_id)] + rest
            out["history"] = (await a.request("chat.history", {"sessionKey": key, "limit": 50})).payload
    return out


def aborted_text(frames: list[EventFrame], run_id: str) -> str | None:
    """The text of the run's ``chat`` aborted event (the Gateway's run-wide buffer at the abort)."""
    return next((_chat_text(f) for f in frames if _is("chat", run_id, state="aborted")(f)), None)


def run_transcript(payload: dict[str, Any], run_id: str) -> list[tuple[str, str, tuple[str, ...], bool]]:
    """R's transcript as owc reads it: (role, text, tool call ids, aborted) per message. A model turn that the
    real Gateway's ``chat.history`` shows as two messages with one ``__openclaw.id`` (its text, then its tool
    call: a display projection) counts as the one message it is, as the simulator stores it."""
    out: list[tuple[str, str, tuple[str, ...], bool]] = []
    last_id = None
    for m in parse_chat_history(payload).messages:
        if m.role == "assistant" and m.assistant_run_id == run_id:
            row = (m.role, m.text, tuple(c.id for c in m.tool_calls), m.aborted)
        elif m.role == "toolResult" and (m.raw.get("__openclaw") or {}).get("runId") == run_id:
            row = (m.role, "", (m.tool_call_id or "",), False)
        else:
            continue
        mid = (m.raw.get("__openclaw") or {}).get("id")
        if out and mid is not None and mid == last_id and out[-1][0] == row[0] == "assistant":
            prev = out[-1]
            row = ("assistant", prev[1] + row[1], prev[2] + row[2], prev[3] or row[3])
            out[-1] = row
        else:
            out.append(row)
        last_id = mid
    return out


def _mine(f: EventFrame, key: str, run_id: str) -> bool:
    p = f.payload
    if f.event == "sessions.changed":
        return p.get("sessionKey") == key
    return p.get("runId") == run_id


async def _collect(client: RawClient, run_id: str, stop) -> list[EventFrame]:
    """This run's events (and its key's session pushes) up to ``stop``, plus any terminal not yet seen."""
    frames = await client.events_until(stop)
    key = next((f.payload.get("sessionKey") for f in frames if f.payload.get("runId") == run_id), None)
    mine = [f for f in frames if _mine(f, key, run_id)]
    if not any(
        f.event == "chat" and f.payload.get("state") in ("final", "aborted", "error")
        for f in mine
        if f.payload.get("runId") == run_id
    ):
        mine += [
            f
            for f in await client.events_until(
                lambda f: (
                    f.event == "chat"
                    and f.payload.get("runId") == run_id
                    and f.payload.get("state") in ("final", "aborted", "error")
                )
            )
            if _mine(f, key, run_id)
        ]
    return mine


def run_stream(frames: list[EventFrame]) -> list[str]:
    kinds: list[str] = []
    ended = False
    for f in frames:
        p = f.payload
        if f.event == "chat":
            state = p.get("state")
            if state == "status":
                continue
            kind = "text" if state == "delta" else f"chat:{state}"
        elif f.event in ("agent", "session.tool"):
            stream, data = p.get("stream"), p.get("data") or {}
            if stream == "lifecycle":
                phase = data.get("phase")
                if phase not in ("start", "end", "error"):
                    continue
                if phase in ("end", "error"):
                    ended = True
                    continue  # the terminal is compared through chat final/aborted
                kind = "lifecycle:start"
            elif stream == "assistant":
                kind = "text"
            elif stream in ("tool", "item"):
                kind = f"{f.event}:{stream}:{data.get('phase')}"
            else:
                continue
        else:
            continue
        if kind == "text" and ended:
            continue
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


def session_stream(frames: list[EventFrame], run_id: str) -> list[str]:
    kinds: list[str] = []
    for f in frames:
        if f.event != "sessions.changed":
            continue
        p = f.payload
        phase = p.get("phase")
        if phase in ("start", "end", "error") and p.get("runId") == run_id:
            kind = f"phase:{phase}"
        elif phase is None and p.get("hasActiveRun") is False and p.get("lastRunId") == run_id:
            kind = "settled"
        else:
            continue
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


def key_sets(frames: list[EventFrame]) -> dict[str, frozenset[str]]:
    """For each normalized kind, the union of owc-read keys present across its frames."""
    out: dict[str, set[str]] = {}

    def add(kind: str, keys: set[str]) -> None:
        out.setdefault(kind, set()).update(keys)

    for f in frames:
        p = f.payload
        if f.event == "chat" and p.get("state") != "status":
            add(f"chat:{p.get('state')}", set(p) & READ_KEYS["chat"])
        elif f.event in ("agent", "session.tool"):
            stream = p.get("stream")
            if stream not in ("lifecycle", "assistant", "tool", "item"):
                continue
            add(f"{f.event}:{stream}", set(p) & READ_KEYS["agent"])
            data = p.get("data") or {}
            if stream == "tool":
                add(f"{f.event}:tool:{data.get('phase')}:data", set(data) & READ_KEYS["tool.data"])
            elif stream == "item":
                add(f"{f.event}:item:{data.get('phase')}:data", set(data) & READ_KEYS["item.data"])
        elif f.event == "sessions.changed" and p.get("phase") in ("start", "end", "error"):
            add(f"sessions.changed:{p['phase']}", set(p) & READ_KEYS["sessions.changed"])
    return {k: frozenset(v) for k, v in out.items()}


def history_shape(payload: dict[str, Any], run_id: str) -> list[tuple[str, frozenset[str], tuple[str, ...]]]:
    """The run's transcript messages: role, owc-read keys present, content part types."""
    shape = []
    for message in payload.get("messages", []):
        meta = message.get("__openclaw") or {}
        belongs = (
            meta.get("runId") == run_id
            or message.get("idempotencyKey") in (f"{run_id}:user", f"{run_id}:assistant")
            or (message.get("openclawAbort") or {}).get("runId") == run_id
        )
        if not belongs:
            continue
        content = message.get("content")
        parts = tuple(p.get("type") for p in content) if isinstance(content, list) else ("string",)
        shape.append((message.get("role"), frozenset(set(message) & READ_KEYS["history.message"]), parts))
    return shape
