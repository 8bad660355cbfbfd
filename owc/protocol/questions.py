"""The Gateway's questions (OpenClaw 2026.9.6 ``ask_user``): the record, its two events and its RPCs. Pure.

A run that calls ``ask_user`` raises a question record and waits. Every operator connection holding
``operator.questions`` or ``operator.admin`` (owc asks for admin) gets ``question.requested`` (the payload is the
record) and, when someone answers, cancels or the Gateway's own clock expires it, ``question.resolved``. The events
are not replayed: a connection opened while a question waits finds it with ``question.list`` (pending ones only).
Measured shapes and rules: ``docs/measured/ask-user-2026.9.6.md``.

The record is parsed strictly where owc relies on a field (an id, the questions it shows) and leniently elsewhere:
a question owc cannot show is skipped with a ``ProtocolError`` naming the field, never half shown.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from owc.protocol import fields as f
from owc.protocol.errors import ProtocolError

#: ``status`` of a record (``QuestionStatusSchema``).
PENDING = "pending"
ANSWERED = "answered"
CANCELLED = "cancelled"
EXPIRED = "expired"
STATUSES = frozenset({PENDING, ANSWERED, CANCELLED, EXPIRED})

#: The Gateway's limits (the protocol's question schema; ``ask_user`` keeps 2-4 options).
MAX_QUESTIONS = 3
#: The error codes ``question.resolve`` answers with (``details.reason``), measured.
NOT_FOUND = "QUESTION_NOT_FOUND"
ALREADY_TERMINAL = "QUESTION_ALREADY_TERMINAL"
INVALID_ANSWER = "QUESTION_INVALID_ANSWER"


@attrs.frozen
class Option:
    label: str
    description: str | None = None


@attrs.frozen
class Question:
    """One of a record's 1-3 questions. ``is_other``: free text is allowed besides the options (every ``ask_user``
    question). ``is_secret``: the ``secrets`` tool's masked questions (never shown in clear, never kept)."""

    question_id: str
    header: str
    question: str
    options: tuple[Option, ...] = ()
    multi_select: bool = False
    is_other: bool = False
    is_secret: bool = False


@attrs.frozen
class QuestionRecord:
    id: str
    questions: tuple[Question, ...]
    status: str = PENDING
    session_key: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    created_at_ms: int | None = None
    expires_at_ms: int | None = None


@attrs.frozen
class QuestionRequested:
    record: QuestionRecord


@attrs.frozen
class QuestionResolved:
    """``question.resolved``: ``status`` answered (with ``answers``), cancelled or expired."""

    id: str
    status: str
    answers: Mapping[str, tuple[str, ...]] | None = None


def question_id(run_id: str, tool_call_id: str) -> str:
    """The id the Gateway gives a run's ``ask_user`` question (measured on every probe question): derivable from
    the transcript, which holds the run id and the tool call id but not the question id."""
    digest = hashlib.sha256(f"{run_id}\0{tool_call_id}".encode("utf-8", "surrogatepass")).hexdigest()
    return "ask_" + digest[:32]


def _question(value: object, where: str) -> Question:
    q = f.obj(value, where)
    options = []
    for i, option in enumerate(f.opt_list(q, "options", where)):
        o = f.obj(option, f"{where}.options[{i}]")
        options.append(Option(f.req_str(o, "label", f"{where}.options[{i}]"), f.opt_str(o, "description", where)))
    text = f.req_str(q, "question", where)
    return Question(
        question_id=f.req_str(q, "questionId", where),
        header=f.opt_str(q, "header", where) or "",
        question=text,
        options=tuple(options),
        multi_select=bool(f.opt_bool(q, "multiSelect", where)),
        is_other=bool(f.opt_bool(q, "isOther", where)),
        is_secret=bool(f.opt_bool(q, "isSecret", where)),
    )


def parse_record(p: f.JSONObject, where: str = "question") -> QuestionRecord:
    raw = f.opt_list(p, "questions", where)
    if not 1 <= len(raw) <= MAX_QUESTIONS:
        raise ProtocolError(f"{where}.questions must hold 1-{MAX_QUESTIONS} questions, got {len(raw)}")
    status = f.opt_str(p, "status", where) or PENDING
    if status not in STATUSES:
        raise ProtocolError(f"{where}.status is not one of {sorted(STATUSES)}: {status[:40]!r}")
    return QuestionRecord(
        id=f.req_id(p, "id", where),
        questions=tuple(_question(q, f"{where}.questions[{i}]") for i, q in enumerate(raw)),
        status=status,
        session_key=f.opt_id(p, "sessionKey", where),
        run_id=f.opt_id(p, "runId", where),
        agent_id=f.opt_str(p, "agentId", where),
        created_at_ms=f.opt_int(p, "createdAtMs", where),
        expires_at_ms=f.opt_int(p, "expiresAtMs", where),
    )


def parse_answers(value: object, where: str) -> dict[str, tuple[str, ...]] | None:
    """``{answers: {<question id>: [values]}}`` (the nested envelope the Gateway sends and takes), or None."""
    if value is None:
        return None
    outer = f.obj(value, where)
    inner = f.obj(outer.get("answers"), f"{where}.answers")
    out: dict[str, tuple[str, ...]] = {}
    for qid, values in inner.items():
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ProtocolError(f"{where}.answers.{str(qid)[:40]} must be a list of strings")
        out[str(qid)] = tuple(values)
    return out


def parse_requested(p: f.JSONObject) -> QuestionRequested:
    return QuestionRequested(parse_record(p, "question.requested"))


def parse_resolved(p: f.JSONObject) -> QuestionResolved:
    w = "question.resolved"
    status = f.req_str(p, "status", w)
    if status not in STATUSES - {PENDING}:
        raise ProtocolError(f"{w}.status is not a final status: {status[:40]!r}")
    return QuestionResolved(id=f.req_id(p, "id", w), status=status, answers=parse_answers(p.get("answers"), w))


def parse_list(result: object) -> tuple[tuple[QuestionRecord, ...], tuple[str, ...]]:
    """``question.list``'s answer: the records owc can show, and one line for each it cannot (a malformed record
    costs that record, not the list)."""
    body = f.obj(result, "question.list")
    records, bad = [], []
    for i, item in enumerate(f.opt_list(body, "questions", "question.list")):
        try:
            records.append(parse_record(f.obj(item, f"question.list.questions[{i}]"), f"question.list.questions[{i}]"))
        except ProtocolError as exc:
            bad.append(str(exc))
    return tuple(records), tuple(bad)


def resolve_params(qid: str, answers: Mapping[str, Sequence[str]], resolved_by: str) -> dict[str, Any]:
    return {"id": qid, "answers": {"answers": {k: list(v) for k, v in answers.items()}}, "resolvedBy": resolved_by}


def cancel_params(qid: str, resolved_by: str) -> dict[str, Any]:
    return {"id": qid, "cancel": True, "resolvedBy": resolved_by}
