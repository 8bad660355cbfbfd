"""The simulator's ``ask_user`` questions (direct mode), against what the real Gateway 2026.9.6 did.

The measured facts are ``docs/measured/ask-user-2026.9.6.md``; every frame the probe's connection A got is in
``docs/measured/ask-user-2026.9.6-frames.md``. The conformance test replays that probe against the simulator (the
same session keys, run ids and requests, the question ids mapped) and compares what comes back: the records, the
RPC answers and refusals word for word, ``question.resolved``, the tool results' texts. The real probe ran with Tool
Search on, so its ``ask_user`` call is nested (``tool_search_code:call_ask1:ask_user:1``) where the simulator's is
direct (``call_ask1``): the ids differ by that alone, and the run's own reply (which wraps the result) is not compared.

The other tests pin each rule of the lifecycle on the wire: answer, cancel, expiry (MockClock), abort, a chat message
as the answer, who is told, ``question.list`` at a late connection, the scope refusal, and a restart's loss.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from owc.protocol import EventFrame
from owc.protocol.questions import question_id
from owc.sim import Ask, End, Text, Then, open_simulator
from owc.sim import questions as qs
from owc.sim.script import ASK_QUESTIONS, ASK_REPLY_PREFIX, ask_user_step

from conftest import TOKEN
from rawclient import RawClient, raw_client
from realgw.fake_model import QUESTIONS, ask_user_arguments

ROOT = Path(__file__).resolve().parents[1]
FRAMES = ROOT / "docs" / "measured" / "ask-user-2026.9.6-frames.md"
KEY = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"
READ_WRITE = ("operator.read", "operator.write")
QUESTIONS_SCOPE = (*READ_WRITE, "operator.questions")
RECORD_KEYS = {"id", "questions", "agentId", "sessionKey", "runId", "createdAtMs", "expiresAtMs", "status"}
#: The real probe's ``ask_user`` call id (Tool Search nests it under ``call_ask1``); the simulator's direct one.
NESTED_CALL = "tool_search_code:call_ask1:ask_user:1"
DIRECT_CALL = "call_ask1"
#: Section 6: what the run is told for the answer case's answers, exactly.
ANSWERED_TEXT = (
    'Target: production\nFeatures: Metrics, Logging\n\n{\n  "status": "answered",\n  "answers": {\n    "answers": '
    '{\n      "deploy_target": [\n        "production"\n      ],\n      "features": [\n        "Metrics",\n'
    '        "Logging"\n      ]\n    }\n  }\n}'
)
NO_ANSWER_JSON = '\n\n{\n  "status": "no_answer"\n}'
#: Section 2: the tool's refusal of ``ASK_USER_BAD``'s arguments (one option).
BAD_TEXT = (
    'Invalid arguments for tool "openclaw:core:ask_user": questions.0.options: must not have fewer than 2 items. '
    "Expected input: { questions: Array<{ header: string; id: string; options: Array<{ label: unknown; "
    "description?: unknown }>; question: string; multiSelect?: boolean }>; timeoutSeconds?: number /* integer */ }."
)
TERMINAL = ("final", "aborted", "error")


# ---------------------------------------------------------------------------------------------- helpers


def _asked(key: str = KEY):
    return lambda f: f.event == "question.requested" and f.payload.get("sessionKey") == key


def _resolved(qid: str):
    return lambda f: f.event == "question.resolved" and f.payload.get("id") == qid


def _end(run_id: str):
    return lambda f: f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") in TERMINAL


def _tool(run_id: str, phase: str):
    return lambda f: (
        f.event == "agent"
        and f.payload.get("runId") == run_id
        and f.payload.get("stream") == "tool"
        and f.payload["data"].get("name") == "ask_user"
        and f.payload["data"].get("phase") == phase
    )


def _item_end(run_id: str):
    return lambda f: (
        f.event == "agent"
        and f.payload.get("runId") == run_id
        and f.payload.get("stream") == "item"
        and f.payload["data"].get("phase") == "end"
    )


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def _questions_seen(client: RawClient) -> list[str]:
    """The ``question.*`` events ``client`` got so far: call it after a request of its own, whose answer fences every
    event queued to it before (one socket, in order)."""
    return [f["event"] for f in client.frames if str(f.get("event", "")).startswith("question.")]


def _reply(client: RawClient, req_id: str) -> dict[str, Any]:
    """A response as it came on the wire (``details: null`` and an absent ``details`` differ there)."""
    return next(f for f in client.frames if f.get("type") == "res" and f.get("id") == req_id)


async def _raw_request(client: RawClient, method: str, params: Any) -> dict[str, Any]:
    req_id = await client.send(method, params)
    await client.response(req_id)
    return _reply(client, req_id)


async def _send(client: RawClient, message: str, run_id: str, key: str = KEY) -> dict[str, Any]:
    res = await client.request("chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id})
    assert res.ok, res.error
    return res.payload


def _canonical(question: dict[str, Any]) -> dict[str, Any]:
    """A question as the record holds it, from the model's arguments (as ``test_realgw_ask_user`` pins it)."""
    out = {"questionId": question["id"], **{k: question[k] for k in ("header", "question", "options")}}
    if question.get("multiSelect"):
        out["multiSelect"] = True
    return {**out, "isOther": True}


# ---------------------------------------------------------------------------------------------- the real frames


@attrs.frozen
class RealFrame:
    """One frame of the probe's connection A: sent (``out``) or received; ``full`` when its line was whole JSON.
    A line cut at 1000 characters keeps what a test needs from its start: the frame's type, event or id, and an
    ``agent`` event's run id, stream, state and ``data`` (the data object comes before the cut)."""

    t: float
    out: bool
    obj: dict[str, Any]
    full: bool


_LINE = re.compile(r"^\s+(\d+\.\d+) (->|<-) (.*)$")
_HEAD = re.compile(r'\{"(?:type|method)": "([^"]+)", "(event|id|params)": ')
#: How the probe cut a string (``probe_ask_user.py``): its first 200 characters, then the whole length.
_CUT = re.compile(r"^(.{200})…<(\d+) chars>$", re.S)


def _lenient(raw: str) -> tuple[dict[str, Any] | None, bool]:
    try:
        return json.loads(raw), True
    except ValueError:
        pass
    head = re.match(r'\{"type": "(\w+)", "(event|id)": "([^"]+)"', raw)
    if head is None:
        return None, False
    obj: dict[str, Any] = {"type": head.group(1), head.group(2): head.group(3)}
    payload: dict[str, Any] = {}
    for key in ("runId", "stream", "state", "status"):
        found = re.search(rf'"{key}": "([^"]+)"', raw)
        if found:
            payload[key] = found.group(1)
    at = raw.find('"data": ')
    if at >= 0:
        try:
            payload["data"], _ = json.JSONDecoder().raw_decode(raw, at + len('"data": '))
        except ValueError:
            pass
    obj["payload"] = payload
    return obj, False


def real_cases() -> dict[str, list[RealFrame]]:
    """The probe's cases in file order, each the frames connection A sent and got."""
    cases: dict[str, list[RealFrame]] = {}
    name = None
    for line in FRAMES.read_text().splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            cases[name] = []
            continue
        found = _LINE.match(line)
        if found is None or name is None:
            continue
        obj, full = _lenient(found.group(3))
        if obj is not None:
            cases[name].append(RealFrame(float(found.group(1)), found.group(2) == "->", obj, full))
    return cases


def fits(sim: Any, real: Any, where: str = "") -> None:
    """``sim`` is what ``real`` shows: the same keys and values, a string the probe cut matching its first 200
    characters and its whole length."""
    if isinstance(real, dict):
        assert isinstance(sim, dict) and set(sim) == set(real), f"{where}: keys {sorted(sim)} != {sorted(real)}"
        for k in real:
            fits(sim[k], real[k], f"{where}.{k}")
    elif isinstance(real, list):
        assert isinstance(sim, list) and len(sim) == len(real), f"{where}: {sim!r} != {real!r}"
        for i, (s, r) in enumerate(zip(sim, real)):
            fits(s, r, f"{where}[{i}]")
    elif isinstance(real, str) and _CUT.match(real):
        prefix, length = _CUT.match(real).groups()  # type: ignore[union-attr]
        assert isinstance(sim, str) and (sim[:200], len(sim)) == (prefix, int(length)), f"{where}: {sim!r} != {real!r}"
    else:
        assert type(sim) is type(real) and sim == real, f"{where}: {sim!r} != {real!r}"


def normal(value: Any) -> Any:
    """A record's two timestamps as its lifetime (each Gateway has its own clock; the difference is the rule)."""
    if isinstance(value, dict):
        out = {k: normal(v) for k, v in value.items() if k not in ("createdAtMs", "expiresAtMs")}
        if "createdAtMs" in value:
            assert isinstance(value["createdAtMs"], int) and isinstance(value["expiresAtMs"], int)
            out["ttlMs"] = value["expiresAtMs"] - value["createdAtMs"]
        return out
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def swap(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with each question id in ``ids`` replaced by its counterpart."""
    text = json.dumps(value)
    for old, new in ids.items():
        text = text.replace(old, new)
    return json.loads(text)


def _responses(frames: list[RealFrame]) -> dict[str, dict[str, Any]]:
    return {f.obj["id"]: f.obj for f in frames if not f.out and f.obj.get("type") == "res"}


def _answered_elsewhere(frames: list[RealFrame]) -> dict[str, dict[str, Any]]:
    """The questions of a case another connection answered (B or Q: their requests are not in A's frames), as the
    ``question.resolve`` params that give the same outcome: the answers ``question.resolved`` carried, and the
    ``resolvedBy`` a later ``question.get`` showed."""
    responses = _responses(frames)
    sent = [f.obj for f in frames if f.out]
    here = {
        r["params"]["id"]
        for r in sent
        if r["method"] == "question.resolve" and responses.get(r["id"], {}).get("ok") is True
    }
    if sum(r["method"] == "chat.send" for r in sent) > 1:
        return {}  # a later send on the session was the answer (the plain case)
    out: dict[str, dict[str, Any]] = {}
    for f in frames:
        payload = f.obj.get("payload") or {}
        if f.obj.get("event") == "question.resolved" and payload.get("status") == "answered":
            if payload["id"] not in here:
                out[payload["id"]] = {"id": payload["id"], "answers": payload["answers"]}
    for r in sent:
        got = responses.get(r["id"], {})
        record = (got.get("payload") or {}).get("question") or {}
        if r["method"] == "question.get" and record.get("id") in out and "resolvedBy" in record:
            out[record["id"]]["resolvedBy"] = record["resolvedBy"]
    return out


# ---------------------------------------------------------------------------------------------- conformance


def test_the_sim_asks_the_fake_models_questions() -> None:
    """The simulator's default responder asks what the real Gateway's fake model asks, for every trigger."""
    assert ASK_QUESTIONS == QUESTIONS
    for words in ("ASK_USER please", "ASK_USER_1 x", "ASK_USER_2", "ASK_USER_3 go", "ASK_USER_1_T30", "ASK_USER_BAD"):
        step = ask_user_step(words)
        assert step is not None and step.call_id == DIRECT_CALL
        assert qs.ask_arguments(step.questions, step.timeout_s) == ask_user_arguments(words)
    assert ask_user_step("no question here") is None


def test_the_result_texts_are_the_measured_ones() -> None:
    """Section 6 word for word, ``JSON.stringify(_, null, 2)`` included."""
    questions = qs.canonical_questions({"questions": list(QUESTIONS[:2])})
    answers = {"deploy_target": ["production"], "features": ["Metrics", "Logging"]}
    assert qs.result_of(questions, qs.ANSWERED, answers) == (ANSWERED_TEXT, qs.answered_payload(answers))
    assert qs.result_of(questions, qs.CANCELLED, None) == (
        "The question was cancelled; proceed with best judgment." + NO_ANSWER_JSON,
        {"status": "no_answer"},
    )
    assert (
        qs.result_of(questions, qs.EXPIRED, None)[0]
        == "No answer arrived; proceed with best judgment." + NO_ANSWER_JSON
    )
    assert qs.invalid_arguments({"questions": [QUESTIONS[0]], "timeoutSeconds": 45.5}) == (
        f"{qs.INVALID_ARGUMENTS}timeoutSeconds: must be integer. Expected input: {qs.EXPECTED_INPUT}."
    )
    bad = {"questions": [{**QUESTIONS[0], "options": QUESTIONS[0]["options"][:1]}]}
    assert qs.invalid_arguments(bad) == BAD_TEXT and qs.invalid_arguments({"questions": list(QUESTIONS)}) is None
    assert (
        qs.js_pretty({"a": ["é", "\u0001"], "b": {}, "c": []})
        == '{\n  "a": [\n    "é",\n    "\\u0001"\n  ],\n  "b": {},\n  "c": []\n}'
    )


async def test_the_sim_answers_the_real_probe_as_the_real_gateway_did(mock_clock) -> None:
    """The probe's cases replayed: each request A sent (same keys, run ids and request ids; question ids mapped), and
    the answers another connection gave (B's, Q's) from a second one. Compared with the real frames: every RPC answer
    and refusal (records by their keys and lifetime), the ``question.*`` events in order, the ``ask_user`` tool
    results, and the runs' terminals. The expiry's 30 s and the 15 s grace pass on the MockClock."""
    cases = real_cases()
    assert len(cases) == 9 and all(cases.values())
    async with (
        open_simulator(token=TOKEN) as sim,
        raw_client(sim.url, TOKEN, instance_id="A") as a,
        raw_client(sim.url, TOKEN, instance_id="Q", scopes=QUESTIONS_SCOPE) as other,
    ):
        seen: list[EventFrame] = []  # every event A got, in order
        ids: dict[str, str] = {}  # real question id -> the simulator's (same run, direct call id)

        async def until(match) -> EventFrame:
            if not any(match(f) for f in seen):
                seen.extend(await a.events_until(match))
            return next(f for f in seen if match(f))

        for name, frames in cases.items():
            responses = _responses(frames)
            elsewhere = _answered_elsewhere(frames)
            back = lambda value: swap(value, {v: k for k, v in ids.items()})  # noqa: E731
            for frame in frames:
                obj = frame.obj
                if frame.out:
                    method, params = obj["method"], obj["params"]
                    if method == "chat.history":
                        continue  # Tool Search's transcript is not direct mode's (tested below)
                    if method == "chat.send":
                        real_qid = question_id(params["idempotencyKey"], NESTED_CALL)
                        ids[real_qid] = question_id(params["idempotencyKey"], DIRECT_CALL)
                    await a.send(method, swap(params, ids), obj["id"])
                    await a.response(obj["id"])
                    got, real = normal(back(_reply(a, obj["id"]))), responses[obj["id"]]
                    fits(got, normal(real), f"{name} {method} {json.dumps(params)[:80]}")
                    continue
                payload = obj.get("payload") or {}
                event = obj.get("event")
                if event == "question.requested":
                    run_id = payload["runId"]
                    mine = await until(lambda f: f.event == "question.requested" and f.payload["runId"] == run_id)  # noqa: B023
                    assert mine.payload["id"] == question_id(run_id, DIRECT_CALL)
                    if frame.full:
                        assert payload["id"] == question_id(run_id, NESTED_CALL)  # the id rule, on the real ids
                        assert set(payload) == RECORD_KEYS
                        fits(normal(back(mine.payload)), normal(payload), f"{name} question.requested")
                    answered = elsewhere.get(question_id(run_id, NESTED_CALL))
                    if answered is not None:
                        got = await _raw_request(other, "question.resolve", swap(answered, ids))
                        assert got["ok"], got
                elif event == "question.resolved":
                    mine = await until(_resolved(ids[payload["id"]]))
                    fits(back(mine.payload), payload, f"{name} question.resolved")
                elif event == "agent" and (payload.get("data") or {}).get("name") == "ask_user":
                    data = payload["data"]
                    if payload["stream"] != "tool" or data["phase"] != "result":
                        continue
                    run_id = payload["runId"]
                    if data["result"]["content"][0]["text"].startswith("No answer arrived"):
                        # The Gateway's own clock expires it: jump the simulator's to the question's deadline.
                        question = sim.questions.records[question_id(run_id, DIRECT_CALL)]
                        mock_clock.jump(question.deadline - trio.current_time())
                    mine = (await until(_tool(run_id, "result"))).payload["data"]
                    assert mine["isError"] is data["isError"] and mine["toolCallId"] == DIRECT_CALL
                    fits(mine["result"]["content"], data["result"]["content"], f"{name} tool result")
                    if data["result"]["content"][0]["text"] != qs.ABORTED_TEXT:  # direct mode's abort: details {}
                        fits(mine["result"]["details"], data["result"]["details"], f"{name} tool details")
                    else:
                        assert mine["result"]["details"] == {}
                elif event == "chat" and payload.get("state") in TERMINAL:
                    mine = await until(_end(payload["runId"]))
                    if frame.full and payload["state"] == "final" and "message" not in payload:  # a send that answered
                        fits(mine.payload, payload, f"{name} bare final")
                    else:
                        assert mine.payload["state"] == payload["state"]
                        assert mine.payload.get("stopReason") == payload.get("stopReason")
            # The question events of the case, in order (the real lines A got, the cut ones too).
            real_kinds = [
                (f.obj["event"], f.obj["payload"].get("status"))
                for f in frames
                if str(f.obj.get("event")).startswith("question.")
            ]
            mine_ids = {
                question_id(f.obj["params"]["idempotencyKey"], DIRECT_CALL)
                for f in frames
                if f.out and f.obj["method"] == "chat.send"
            }
            sim_kinds = [
                (f.event, f.payload.get("status"))
                for f in seen
                if f.event.startswith("question.") and f.payload["id"] in mine_ids
            ]
            assert sim_kinds == real_kinds, name
    assert sorted(sim.requests) == sorted({"sessions.subscribe", "chat.send", "chat.abort"} | {
        f.obj["method"] for fs in cases.values() for f in fs if f.out and f.obj["method"].startswith("question.")
    })  # fmt: skip


# ---------------------------------------------------------------------------------------------- the lifecycle


async def test_an_answer_continues_the_run_with_the_measured_text_and_transcript() -> None:
    async with (
        open_simulator(token=TOKEN) as sim,
        raw_client(sim.url, TOKEN, instance_id="A") as a,
        raw_client(sim.url, TOKEN, instance_id="N", caps=()) as n,
        raw_client(sim.url, TOKEN, instance_id="Q", scopes=QUESTIONS_SCOPE) as q,
        raw_client(sim.url, TOKEN, instance_id="RW", scopes=READ_WRITE) as rw,
    ):
        await a.request("sessions.subscribe", {})
        await _send(a, "ASK_USER please decide", "r1")
        before = await a.events_until(_asked())
        record = before[-1].payload
        qid = record["id"]
        start = next(f for f in before if _tool("r1", "start")(f)).payload["data"]
        # No frame of the run while it waits: the question is raised right after the tool start.
        assert before.index(next(f for f in before if _tool("r1", "start")(f))) == len(before) - 2
        refused = await a.request("question.resolve", {"id": qid, "answers": {"answers": {"features": ["Logging"]}}})
        assert (refused.error.code, refused.error.message) == (
            "INVALID_REQUEST",
            "question 'deploy_target' requires an answer",
        )
        assert sim.questions.records[qid].status == "pending" and sim.active_run(KEY) is not None  # nothing changed
        given = {"deploy_target": [" production "], "features": ["Metrics", "Logging"]}
        answered = await a.request(
            "question.resolve", {"id": qid, "answers": {"answers": given}, "resolvedBy": "owc:t"}
        )
        after = await a.events_until(_end("r1"))
        got = await a.request("question.get", {"id": qid})
        listed = await a.request("question.list", {})
        again = await _raw_request(a, "question.resolve", {"id": qid, "cancel": True})
        history = (await a.request("chat.history", {"sessionKey": KEY})).payload["messages"]
        told = next(f for f in after if _resolved(qid)(f)).payload
        for other in (n, q):
            assert (await other.event(_asked())).payload == record
            assert (await other.event(_resolved(qid))).payload == told
        await rw.request("sessions.list", {})
        assert _questions_seen(rw) == []

    assert set(record) == RECORD_KEYS and record["status"] == "pending"
    assert record["id"] == question_id("r1", "call_ask1") == question_id("r1", start["toolCallId"])
    assert record["questions"] == [_canonical(x) for x in QUESTIONS[:2]]
    assert (record["agentId"], record["sessionKey"], record["runId"]) == ("main", KEY, "r1")
    assert record["expiresAtMs"] - record["createdAtMs"] == 900_000
    assert start == {
        "phase": "start",
        "name": "ask_user",
        "toolCallId": "call_ask1",
        "args": {"questions": list(QUESTIONS[:2])},
    }
    answers = {"answers": {"deploy_target": ["production"], "features": ["Metrics", "Logging"]}}
    assert answered.payload == {"status": "answered", "answers": answers}
    result = next(f for f in after if _tool("r1", "result")(f)).payload["data"]
    assert result == {
        "phase": "result",
        "name": "ask_user",
        "toolCallId": "call_ask1",
        "isError": False,
        "result": {
            "content": [{"type": "text", "text": ANSWERED_TEXT}],
            "details": {"status": "answered", "answers": answers},
        },
    }
    item = next(f for f in after if _item_end("r1")(f)).payload["data"]
    assert (item["title"], item["status"], item["meta"]) == (
        "Ask User Where should this deploy?", "completed", "Where should this deploy?")  # fmt: skip
    final = after[-1].payload
    assert final["state"] == "final" and _text(final["message"]) == ASK_REPLY_PREFIX + ANSWERED_TEXT
    assert got.payload["question"] == {**record, "status": "answered", "answers": answers, "resolvedBy": "owc:t"}
    assert listed.payload == {"questions": []}
    assert again["error"] == {
        "code": "INVALID_REQUEST",
        "message": f"question '{qid}' is already answered",
        "details": {"reason": "QUESTION_ALREADY_TERMINAL"},
    }
    assert [m["role"] for m in history] == ["user", "assistant", "toolResult", "assistant"]
    (call,) = history[1]["content"]
    assert (call["type"], call["id"], call["name"], call["arguments"]) == (
        "toolCall", "call_ask1", "ask_user", {"questions": list(QUESTIONS[:2])})  # fmt: skip
    assert (history[2]["toolName"], history[2]["toolCallId"], history[2]["isError"]) == ("ask_user", "call_ask1", False)
    assert _text(history[2]) == ANSWERED_TEXT and _text(history[3]) == ASK_REPLY_PREFIX + ANSWERED_TEXT


async def test_a_cancel_tells_the_run_to_proceed_without_an_answer() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        await _send(a, "ASK_USER_1 please decide", "c1")
        qid = (await a.event(_asked())).payload["id"]
        cancelled = await a.request("question.resolve", {"id": qid, "cancel": True})
        events = await a.events_until(_end("c1"))
        got = await a.request("question.get", {"id": qid})
        again = await a.request("question.resolve", {"id": qid, "answers": {"answers": {"deploy_target": ["x"]}}})
    told = "The question was cancelled; proceed with best judgment." + NO_ANSWER_JSON
    assert cancelled.payload == {"status": "cancelled"}
    (result,) = [f.payload["data"] for f in events if _tool("c1", "result")(f)]
    assert (result["isError"], result["result"]["content"][0]["text"]) == (False, told)
    assert [f.payload for f in events if f.event == "question.resolved"] == [{"id": qid, "status": "cancelled"}]
    assert _text(events[-1].payload["message"]) == ASK_REPLY_PREFIX + told
    record = got.payload["question"]
    assert record["status"] == "cancelled" and "resolvedBy" not in record and "answers" not in record
    assert again.error.message == f"question '{qid}' is already cancelled"


async def test_a_question_expires_on_the_gateways_clock_and_is_forgotten_15s_later(mock_clock) -> None:
    """Rule 7 on the MockClock: ``_T30`` expires 30 s after it was raised (not a moment before), the run is told
    "No answer arrived", and the terminal record stays readable 15 s, then ``QUESTION_NOT_FOUND``."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        await _send(a, "ASK_USER_1_T30 please decide", "e1")
        record = (await a.event(_asked())).payload
        qid = record["id"]
        mock_clock.jump(29.999)
        pending = await a.request("question.get", {"id": qid})
        mock_clock.jump(0.001)
        events = await a.events_until(_end("e1"))
        late = await a.request("question.resolve", {"id": qid, "cancel": True})
        mock_clock.jump(14.999)
        kept = await a.request("question.get", {"id": qid})
        mock_clock.jump(0.001)
        gone = await _raw_request(a, "question.get", {"id": qid})
        listed = await a.request("question.list", {})
    told = "No answer arrived; proceed with best judgment." + NO_ANSWER_JSON
    assert record["expiresAtMs"] - record["createdAtMs"] == 30_000
    assert pending.payload["question"]["status"] == "pending"
    (result,) = [f.payload["data"]["result"] for f in events if _tool("e1", "result")(f)]
    assert result == {"content": [{"type": "text", "text": told}], "details": {"status": "no_answer"}}
    assert [f.payload for f in events if f.event == "question.resolved"] == [{"id": qid, "status": "expired"}]
    assert _text(events[-1].payload["message"]) == ASK_REPLY_PREFIX + told
    assert late.error.message == f"question '{qid}' is already expired"
    assert kept.payload["question"] == {**record, "status": "expired"}
    assert gone["error"] == {
        "code": "INVALID_REQUEST",
        "message": f"question '{qid}' was not found",
        "details": {"reason": "QUESTION_NOT_FOUND"},
    }
    assert listed.payload == {"questions": []}


async def test_the_timeout_is_clamped_as_the_tool_clamps_it() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        lifetimes = []
        for n, words in enumerate(("ASK_USER_1_T5", "ASK_USER_1_T9999")):
            key = f"{KEY}-{n}"
            await _send(a, words, f"t{n}", key)
            record = (await a.event(_asked(key))).payload
            lifetimes.append(record["expiresAtMs"] - record["createdAtMs"])
            await a.request("question.resolve", {"id": record["id"], "cancel": True})
        await sim.wait_for(sim.quiescent)
    assert lifetimes == [30_000, 3_600_000]


async def test_an_abort_cancels_the_question_and_the_transcript_keeps_only_the_call() -> None:
    """Section 8: ``chat.abort`` while the question waits: the run ends aborted, its ``ask_user`` call ends
    ``Aborted`` (an error, item failed), the question is cancelled ``requester-inactive``; no tool result is kept."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        await _send(a, "ASK_USER_1 please decide", "a1")
        qid = (await a.event(_asked())).payload["id"]
        aborted = await a.request("chat.abort", {"sessionKey": KEY, "runId": "a1"})
        events = await a.events_until(_resolved(qid))
        got = await a.request("question.get", {"id": qid})
        history = (await a.request("chat.history", {"sessionKey": KEY})).payload["messages"]
    assert aborted.payload == {"ok": True, "aborted": True, "runIds": ["a1"]}
    terminal = next(f for f in events if _end("a1")(f)).payload
    assert (terminal["state"], terminal["stopReason"]) == ("aborted", "rpc")
    result = next(f for f in events if _tool("a1", "result")(f)).payload["data"]
    assert (result["isError"], result["result"]) == (
        True,
        {"content": [{"type": "text", "text": "Aborted"}], "details": {}},
    )
    item = next(f for f in events if _item_end("a1")(f)).payload["data"]
    assert (item["status"], item["error"]) == ("failed", "Aborted")
    assert events[-1].payload == {"id": qid, "status": "cancelled"}
    assert events.index(next(f for f in events if _end("a1")(f))) < len(events) - 1
    record = got.payload["question"]
    assert (record["status"], record["resolvedBy"]) == ("cancelled", "requester-inactive")
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert [p["name"] for p in history[1]["content"]] == ["ask_user"]
    assert sim.active_run(KEY) is None and sim.questions.pending() == []


async def test_a_chat_message_while_the_question_waits_is_its_answer() -> None:
    """Section 9: the send answers the question (``resolvedBy: "plain-text"``); its own run id gets only a bare
    ``chat`` final; the user's words are stored between the tool call and its result; the asking run goes on."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        await a.request("sessions.subscribe", {})
        await _send(a, "ASK_USER_1 please decide", "p1")
        qid = (await a.event(_asked())).payload["id"]
        reply = await _send(a, "2", "p2")
        events = await a.events_until(_end("p1"))
        got = await a.request("question.get", {"id": qid})
        history = (await a.request("chat.history", {"sessionKey": KEY})).payload["messages"]
    told = qs.result_of(
        qs.canonical_questions({"questions": [QUESTIONS[0]]}), "answered", {"deploy_target": ["Production"]}
    )[0]
    assert reply == {"runId": "p2", "status": "started"}
    assert [f.payload for f in events if f.payload.get("runId") == "p2" and f.event in ("chat", "agent")] == [
        {"runId": "p2", "sessionKey": KEY, "seq": 1, "state": "final"}
    ]
    assert next(f for f in events if _tool("p1", "result")(f)).payload["data"]["result"]["content"][0]["text"] == told
    assert _text(events[-1].payload["message"]) == ASK_REPLY_PREFIX + told
    question = got.payload["question"]
    assert (question["answers"], question["resolvedBy"]) == (
        {"answers": {"deploy_target": ["Production"]}},
        "plain-text",
    )
    assert [(m["role"], _text(m)) for m in history][1:4] == [("assistant", ""), ("user", "2"), ("toolResult", told)]
    assert history[2]["__openclaw"]["idempotencyKey"] == "p2:user"
    assert "p2" not in sim.runs


@pytest.mark.parametrize(
    ("asked", "text", "answers"),
    [
        (1, "2", {"deploy_target": ["Production"]}),  # an option's number
        (1, "  production ", {"deploy_target": ["Production"]}),  # a label, case-insensitive
        (1, "Somewhere else", {"deploy_target": ["Somewhere else"]}),  # free text
        (2, "deploy_target: 1\nFeatures: metrics; 3, my own", {
            "deploy_target": ["Staging (Recommended)"], "features": ["Metrics", "Tracing", "my own"]}),
        (2, "2: Logging\n1: staging (recommended)", {
            "deploy_target": ["Staging (Recommended)"], "features": ["Logging"]}),
        (2, "Production\nLogging, Metrics", {"deploy_target": ["Production"], "features": ["Logging", "Metrics"]}),
        (2, "just one line", None),  # two questions, one line: not an answer
        (1, "   ", None),
    ],
)  # fmt: skip
def test_plain_text_becomes_answers_as_the_gateway_reads_it(asked: int, text: str, answers: Any) -> None:
    questions = qs.canonical_questions({"questions": list(QUESTIONS[:asked])})
    assert qs.answers_from_text(questions, text) == answers


async def test_every_operator_with_questions_or_admin_is_told_and_read_write_is_refused() -> None:
    """Section 4: A (the sender), N (admin, no caps, not subscribed) and Q (``operator.questions``) get the events;
    RW (read+write) gets none, and its RPCs are refused as measured, ``details: null`` included."""
    async with (
        open_simulator(token=TOKEN) as sim,
        raw_client(sim.url, TOKEN, instance_id="A") as a,
        raw_client(sim.url, TOKEN, instance_id="RW", scopes=READ_WRITE) as rw,
    ):
        await _send(a, "ASK_USER_1 go", "s1")
        qid = (await a.event(_asked())).payload["id"]
        refusals = [
            await _raw_request(rw, "question.list", {}),
            await _raw_request(rw, "question.get", {"id": qid}),
            await _raw_request(rw, "question.resolve", {"id": qid, "cancel": True}),
        ]
        assert sim.questions.records[qid].status == "pending"
        await a.request("question.resolve", {"id": qid, "cancel": True})
        await a.event(_end("s1"))
        await rw.request("sessions.list", {})
        seen = _questions_seen(rw)
    assert seen == []
    for refused in refusals:
        assert refused["error"] == {
            "code": "FORBIDDEN",
            "message": "Session-scoped access requires a verified user profile.",
            "details": None,
        }


async def test_a_late_connection_is_not_told_but_finds_the_question_with_question_list() -> None:
    """Rule 6: no replay; ``hello-ok`` names the events and methods but not the question; ``question.list`` has it."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        await _send(a, "ASK_USER please decide", "l1")
        record = (await a.event(_asked())).payload
        async with raw_client(sim.url, TOKEN, instance_id="late") as late:
            listed = await late.request("question.list", {})
            told = _questions_seen(late)
            hello = late.frames[0]["payload"]
            await late.request("question.resolve", {"id": record["id"], "cancel": True})
            resolved = (await late.event(_resolved(record["id"]))).payload
    assert told == [] and listed.payload == {"questions": [record]}
    assert resolved == {"id": record["id"], "status": "cancelled"}
    assert {"question.requested", "question.resolved"} <= set(hello["features"]["events"])
    assert {"question.list", "question.get", "question.resolve"} <= set(hello["features"]["methods"])
    assert record["id"] not in json.dumps(hello)


@pytest.mark.parametrize("mode", ["restart", "crash", "stop"])
async def test_a_restart_loses_every_question(mode: str) -> None:
    """The question manager is process-local: after any restart the question is gone (``question.list`` empty,
    ``question.get`` not found) and the asking run is cut as any run is."""
    async with open_simulator(token=TOKEN) as sim:
        async with raw_client(sim.url, TOKEN) as a:
            await _send(a, "ASK_USER_1 please decide", "x1")
            qid = (await a.event(_asked())).payload["id"]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sim.restart, mode)
                await a.closed()
            told = [f.payload for f in a.backlog if f.event == "question.resolved"]
        await sim.wait_for(sim.quiescent)
        async with raw_client(sim.url, TOKEN) as again:
            listed = await again.request("question.list", {})
            got = await again.request("question.get", {"id": qid})
    assert listed.payload == {"questions": []} and got.error.details == {"reason": "QUESTION_NOT_FOUND"}
    assert sim.questions.records == {} and sim.runs["x1"].state == "ended"
    # A stop aborts the run first (which cancels its question, told); a restart or a crash cuts it unannounced.
    assert told == ([{"id": qid, "status": "cancelled"}] if mode == "stop" else [])


async def test_bad_arguments_are_an_error_result_and_raise_no_question() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        await _send(a, "ASK_USER_BAD please decide", "b1")
        events = await a.events_until(_end("b1"))
        await a.request("question.list", {})
        seen = _questions_seen(a)
    assert seen == [] and sim.questions.records == {}
    result = next(f for f in events if _tool("b1", "result")(f)).payload["data"]
    content = [{"type": "text", "text": BAD_TEXT}]
    assert result["isError"] is True
    assert result["result"] == {"content": content, "details": {"status": "error", "error": BAD_TEXT}}
    item = next(f for f in events if _item_end("b1")(f)).payload["data"]
    assert (item["status"], item["error"]) == ("blocked", BAD_TEXT)
    assert _text(events[-1].payload["message"]) == ASK_REPLY_PREFIX + BAD_TEXT


@pytest.mark.parametrize("after_end", [False, True])
async def test_question_resolved_goes_after_the_tool_result_or_after_the_runs_final(after_end: bool) -> None:
    """Rule 8: the event is not ordered against the run's terminal; by default it follows the tool result, and
    ``resolved_after_end`` puts it after the run's ``chat`` final, as the real Gateway did at times."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        sim.questions.resolved_after_end = after_end
        await _send(a, "ASK_USER_1 please decide", "o1")
        qid = (await a.event(_asked())).payload["id"]
        await a.request("question.resolve", {"id": qid, "answers": {"answers": {"deploy_target": ["Production"]}}})
        events = await a.events_until(lambda f: _resolved(qid)(f) or _end("o1")(f))
        events += await a.events_until(_end("o1") if events[-1].event == "question.resolved" else _resolved(qid))
    order = [f.event for f in events if _resolved(qid)(f) or _end("o1")(f) or _tool("o1", "result")(f)]
    assert order == (["agent", "chat", "question.resolved"] if after_end else ["agent", "question.resolved", "chat"])


async def test_a_hand_driven_run_asks_and_goes_on_after_the_answer() -> None:
    """``SimRun.ask`` raises the question without waiting; ``sim.questions.answer`` gives the run its result at once;
    the test drives the run on."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as a:
        await a.request("sessions.subscribe", {})  # the run has no sender: its tool events come as session.tool
        run = sim.start_run(KEY, "h1", user_text="decide")
        qid = run.ask(QUESTIONS[:1], timeout_s=60, call_id="call_h")
        assert qid == question_id("h1", "call_h") and run.question is not None and run.question.id == qid
        record = (await a.event(_asked())).payload
        with pytest.raises(qs.QuestionError, match="requires an answer"):
            sim.questions.answer(qid, {})
        sim.questions.answer(qid, {"deploy_target": ["Production"]}, "test")
        assert run.question is None and run.active
        run.text("Deploying to production.").end()
        events = await a.events_until(_end("h1"))
        history = (await a.request("chat.history", {"sessionKey": KEY})).payload["messages"]
    assert record["expiresAtMs"] - record["createdAtMs"] == 60_000
    assert [f.event for f in events if f.event.startswith("question.")] == ["question.resolved"]
    (result,) = [
        f.payload["data"] for f in events if f.event == "session.tool" and f.payload["data"]["phase"] == "result"
    ]
    assert (result["toolCallId"], result["isError"]) == ("call_h", False)
    assert result["result"]["content"][0]["text"].startswith("Target: Production\n\n")
    assert _text(events[-1].payload["message"]) == "Deploying to production."
    assert [m["role"] for m in history] == ["user", "assistant", "toolResult", "assistant"]


async def test_a_scripted_ask_is_followed_by_steps_that_read_the_answer() -> None:
    """A responder's ``Then`` step reads the tool's result: the run's later steps depend on the outcome."""

    def responder(key: str, message: str):
        return [
            Ask(({**QUESTIONS[0], "header": "A header longer than twelve"},), call_id="call_s"),
            Then(lambda told: [Text("Chosen: " + told.splitlines()[0], ("Chosen: " + told.splitlines()[0],)), End()]),
        ]

    async with open_simulator(token=TOKEN, responder=responder) as sim, raw_client(sim.url, TOKEN) as a:
        await _send(a, "anything", "s1")
        record = (await a.event(_asked())).payload
        assert record["questions"][0]["header"] == "A header lon"
        await a.request("question.resolve", {"id": record["id"], "answers": {"answers": {"deploy_target": ["Moon"]}}})
        final = (await a.event(_end("s1"))).payload
    assert _text(final["message"]) == "Chosen: A header lon: Moon"
