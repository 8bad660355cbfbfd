"""Real Gateway tier: OpenClaw 2026.9.6's ``ask_user`` question, the facts owc will rely on (issue 27).

Nothing of owc's own is tested here: raw protocol-4 clients drive the real Gateway (its default config, so Tool
Search is on and the model reaches ``ask_user`` through ``tool_call``: what a user's Gateway does) and the fake
model's ``ASK_USER`` trigger (``tests/realgw/fake_model.py``). Measured and recorded in
``docs/measured/ask-user-2026.9.6.md`` (the probe that measured it: ``tests/realgw/probe_ask_user.py``):

* a run that calls ``ask_user`` raises ``question.requested`` whose payload is the record ``{id, questions,
  agentId, sessionKey, runId, createdAtMs, expiresAtMs, status: "pending"}``: ``id`` is ``ask_`` + the first 32
  hex digits of sha256(``<runId>\\0<the ask_user tool call id>``), the questions come back canonical (the model's
  ``id`` as ``questionId``, ``isOther: true`` added, ``multiSelect`` only when true), the default expiry is 900 s;
  every operator connection with ``operator.admin`` (or ``operator.questions``) gets it, one with only
  read+write does not and is refused ``question.list``; ``question.list`` / ``question.get`` return the record;
* ``question.resolve {id, answers: {answers: {<questionId>: [...]}}}`` answers it (values trimmed, an option's
  label kept exact), ``question.resolved {id, status: "answered", answers}`` follows, the run continues and the
  transcript holds the ask_user call and its result text (``<header>: <values>`` lines, then the JSON payload);
* ``question.resolve {id, cancel: true}`` ends it ``cancelled``; the run is told "The question was cancelled;
  proceed with best judgment." with ``{"status": "no_answer"}``.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

import pytest
import trio

from owc import ids
from owc.protocol import EventFrame

from rawclient import RawClient, raw_client
from realgw.fake_model import ASK_REPLY_PREFIX, QUESTIONS

pytestmark = pytest.mark.realgateway

ADMIN = ("operator.read", "operator.write", "operator.admin")  # what owc asks for (owc/protocol/handshake.py)
READ_WRITE = ("operator.read", "operator.write")
TERMINAL = ("final", "aborted", "error")
RECORD_KEYS = {"id", "questions", "agentId", "sessionKey", "runId", "createdAtMs", "expiresAtMs", "status"}
DEFAULT_EXPIRY_MS = 900_000
WAIT_S = 180  # the first run on a fresh Gateway prepares its workspace for 10-20 s on this machine


def _canonical(question: dict[str, Any]) -> dict[str, Any]:
    """A question as the Gateway's record holds it, from the arguments the model gave ``ask_user``."""
    out = {k: question[k] for k in ("header", "question", "options")}
    out = {"questionId": question["id"], **out}
    if question.get("multiSelect"):
        out["multiSelect"] = True
    return {**out, "isOther": True}


def _result_text(lines: list[str], payload: dict[str, Any]) -> str:
    """``ask_user``'s result text: the summary lines, a blank line, the payload as ``JSON.stringify(p, null, 2)``."""
    return "\n".join(lines) + ("\n\n" if lines else "") + json.dumps(payload, indent=2)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def _asked(key: str):
    return lambda f: f.event == "question.requested" and f.payload.get("sessionKey") == key


def _resolved(question_id: str):
    return lambda f: f.event == "question.resolved" and f.payload.get("id") == question_id


def _end(run_id: str):
    return lambda f: f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") in TERMINAL


def _ask_user_start(run_id: str):
    return lambda f: (
        f.event == "agent"
        and f.payload.get("runId") == run_id
        and f.payload.get("stream") == "tool"
        and (f.payload.get("data") or {}).get("name") == "ask_user"
        and (f.payload.get("data") or {}).get("phase") == "start"
    )


async def _ask(client: RawClient, message: str) -> tuple[str, str, list[EventFrame]]:
    """Send ``message`` on a fresh Open WebUI chat key; every event up to the run's ``question.requested``."""
    key = ids.session_key("main", "u-ask", str(uuid.uuid4()))
    run_id = str(uuid.uuid4())
    sent = await client.request("chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id})
    assert sent.ok, sent.error
    return key, run_id, await client.events_until(_asked(key))


def _questions_seen(client: RawClient) -> list[str]:
    """The ``question.*`` events ``client`` got so far. Call it after a request of its own: the answer fences every
    broadcast sent to it before (one socket, in order), so nothing sent earlier can still be on its way."""
    return [f["event"] for f in client.frames if str(f.get("event", "")).startswith("question.")]


async def test_a_run_that_asks_raises_question_requested_with_the_record(real_gateway) -> None:
    with trio.fail_after(WAIT_S):
        async with (
            raw_client(real_gateway.url, real_gateway.token, instance_id="ask-a", scopes=ADMIN) as a,
            raw_client(real_gateway.url, real_gateway.token, instance_id="ask-b", caps=(), scopes=ADMIN) as b,
            raw_client(real_gateway.url, real_gateway.token, instance_id="ask-rw", scopes=READ_WRITE) as rw,
        ):
            key, run_id, events = await _ask(a, "ASK_USER please decide")
            record = events[-1].payload
            start = next(f for f in events if _ask_user_start(run_id)(f))
            seen_by_b = (await b.event(_asked(key))).payload
            listed = await a.request("question.list", {})
            got = await a.request("question.get", {"id": record["id"]})
            refused = await rw.request("question.list", {})
            rw_seen = _questions_seen(rw)  # after its refused request: the fence
            cancelled = await a.request("question.resolve", {"id": record["id"], "cancel": True})  # let the run end
            await a.event(_end(run_id))

    assert set(record) == RECORD_KEYS, record
    tool_call_id = start.payload["data"]["toolCallId"]
    digest = hashlib.sha256(f"{run_id}\0{tool_call_id}".encode()).hexdigest()[:32]
    assert record["id"] == f"ask_{digest}"
    assert re.fullmatch(r"ask_[0-9a-f]{32}", record["id"])
    assert record["questions"] == [_canonical(q) for q in QUESTIONS[:2]]
    assert (record["agentId"], record["sessionKey"], record["runId"]) == ("main", key, run_id)
    assert record["status"] == "pending"
    assert record["expiresAtMs"] - record["createdAtMs"] == DEFAULT_EXPIRY_MS
    # Another operator connection (no caps, no subscription) gets the same record; read+write alone gets nothing.
    assert seen_by_b == record
    assert listed.ok and [q for q in listed.payload["questions"] if q["id"] == record["id"]] == [record]
    assert got.ok and got.payload == {"question": record}
    assert not refused.ok and refused.error.code == "FORBIDDEN", refused
    assert rw_seen == []
    assert cancelled.ok, cancelled.error


async def test_question_resolve_with_an_answer_continues_the_run(real_gateway) -> None:
    with trio.fail_after(WAIT_S):
        async with (
            raw_client(real_gateway.url, real_gateway.token, instance_id="ask-a", scopes=ADMIN) as a,
            raw_client(real_gateway.url, real_gateway.token, instance_id="ask-b", scopes=ADMIN) as b,
        ):
            key, run_id, events = await _ask(a, "ASK_USER please decide")
            qid = events[-1].payload["id"]
            tool_call_id = next(f for f in events if _ask_user_start(run_id)(f)).payload["data"]["toolCallId"]
            await b.event(_asked(key))
            short = await a.request("question.resolve", {"id": qid, "answers": {"answers": {"features": ["Logging"]}}})
            pending = await a.request("question.get", {"id": qid})
            given = {"deploy_target": ["  Production "], "features": ["Metrics", "Logging"]}
            answered = await a.request("question.resolve", {"id": qid, "answers": {"answers": given}})
            resolved_a = (await a.event(_resolved(qid))).payload
            resolved_b = (await b.event(_resolved(qid))).payload
            end = (await a.event(_end(run_id))).payload
            after = await a.request("question.get", {"id": qid})
            listed = await a.request("question.list", {})
            again = await a.request("question.resolve", {"id": qid, "cancel": True})
            history = await a.request("chat.history", {"sessionKey": key, "limit": 50})

    assert not short.ok and short.error.code == "INVALID_REQUEST", short
    assert short.error.details == {"reason": "QUESTION_INVALID_ANSWER"}
    assert short.error.message == "question 'deploy_target' requires an answer"
    assert pending.ok and pending.payload["question"]["status"] == "pending"  # a refused answer changes nothing
    answers = {"answers": {"deploy_target": ["Production"], "features": ["Metrics", "Logging"]}}  # trimmed
    assert answered.ok and answered.payload == {"status": "answered", "answers": answers}
    assert resolved_a == resolved_b == {"id": qid, "status": "answered", "answers": answers}
    assert after.ok and after.payload["question"]["status"] == "answered"
    assert after.payload["question"]["answers"] == answers
    assert qid not in [q["id"] for q in listed.payload["questions"]]  # list: pending ones only
    assert not again.ok and again.error.details == {"reason": "QUESTION_ALREADY_TERMINAL"}, again
    assert again.error.message == f"question '{qid}' is already answered"

    # The run went on with the answer: what it was told, in the run's final reply and in the transcript.
    told = _result_text(
        ["Target: Production", "Features: Metrics, Logging"], {"status": "answered", "answers": answers}
    )
    assert end["state"] == "final"
    final = _text(end["message"])
    assert final.startswith(ASK_REPLY_PREFIX)
    wrapper = json.loads(final.removeprefix(ASK_REPLY_PREFIX))  # Tool Search's tool_call wraps the tool's result
    assert wrapper["tool"] == {"id": "openclaw:core:ask_user", "name": "ask_user", "source": "openclaw"}
    assert wrapper["result"]["content"] == [{"type": "text", "text": told}]
    assert wrapper["result"]["details"] == {"status": "answered", "answers": answers}

    assert history.ok, history.error
    messages = history.payload["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "custom", "toolResult", "assistant"]
    call = messages[1]["content"]
    assert [(p["type"], p["name"], p["arguments"]["id"]) for p in call] == [("toolCall", "tool_call", "ask_user")]
    assert call[0]["arguments"]["args"] == {"questions": list(QUESTIONS[:2])}
    nested = messages[2]
    assert nested["customType"] == "openclaw.nested-tool.v1"
    inner_call, inner_result = nested["content"]
    assert (inner_call["type"], inner_call["name"], inner_call["id"]) == ("toolCall", "ask_user", tool_call_id)
    assert inner_call["arguments"] == {"questions": list(QUESTIONS[:2])}
    assert (inner_result["type"], inner_result["toolName"], inner_result["toolCallId"]) == (
        "toolResult", "ask_user", tool_call_id)  # fmt: skip
    assert inner_result["isError"] is False
    assert inner_result["content"] == [{"type": "text", "text": told}]
    assert (messages[3]["toolName"], messages[3]["toolCallId"]) == ("tool_call", call[0]["id"])
    assert json.loads(_text(messages[3]))["result"]["content"] == [{"type": "text", "text": told}]
    assert _text(messages[4]) == final


async def test_question_resolve_cancel_ends_the_question_cancelled(real_gateway) -> None:
    with trio.fail_after(WAIT_S):
        async with raw_client(real_gateway.url, real_gateway.token, instance_id="ask-a", scopes=ADMIN) as a:
            key, run_id, events = await _ask(a, "ASK_USER_1 please decide")
            record = events[-1].payload
            qid = record["id"]
            cancelled = await a.request("question.resolve", {"id": qid, "cancel": True})
            resolved = (await a.event(_resolved(qid))).payload
            end = (await a.event(_end(run_id))).payload
            after = await a.request("question.get", {"id": qid})
            again = await a.request("question.resolve", {"id": qid, "answers": {"answers": {
                "deploy_target": ["Production"]}}})  # fmt: skip
            history = await a.request("chat.history", {"sessionKey": key, "limit": 50})

    assert record["questions"] == [_canonical(QUESTIONS[0])]
    assert cancelled.ok and cancelled.payload == {"status": "cancelled"}
    assert resolved == {"id": qid, "status": "cancelled"}
    assert after.ok and after.payload["question"] == {**record, "status": "cancelled"}  # no answers, no resolvedBy
    assert not again.ok and again.error.details == {"reason": "QUESTION_ALREADY_TERMINAL"}, again
    assert again.error.message == f"question '{qid}' is already cancelled"
    # The run is told, and goes on (the model decides what to do without an answer).
    told = _result_text(["The question was cancelled; proceed with best judgment."], {"status": "no_answer"})
    assert end["state"] == "final"
    wrapper = json.loads(_text(end["message"]).removeprefix(ASK_REPLY_PREFIX))
    assert wrapper["result"]["content"] == [{"type": "text", "text": told}]
    assert wrapper["result"]["details"] == {"status": "no_answer"}
    nested = [m for m in history.payload["messages"] if m.get("customType") == "openclaw.nested-tool.v1"]
    assert [p["content"] for p in nested[0]["content"] if p["type"] == "toolResult"] == [
        [{"type": "text", "text": told}]
    ]
