"""The Gateway's questions (OpenClaw 2026.9.6 ``ask_user``), as the simulator raises, answers and forgets them.

A run whose model calls ``ask_user`` (offered directly, as with ``tools.toolSearch: false``) raises a question record
and waits: no ``chat`` or ``agent`` frame of the run until someone answers it (``question.resolve``, or a
``chat.send`` on the session taken as the answer), cancels it, the run is aborted, or the Gateway's own clock
(Trio's: MockClock in tests) expires it. The run then gets the tool's result text and goes on in the same run id.
Everything here follows ``docs/measured/ask-user-2026.9.6.md`` (its sections are cited as "section N"); what the
probe did not measure is said so where it is modelled.

``Questions`` is the process-local manager (``QuestionManager`` in the real dist): a restart loses it all. It knows
records, answers and who is told; the run's own events (the tool call and its result) are ``runs.RunDriver``'s, which
plays ``Ask`` steps and is told through ``settled`` when a question ends.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from owc.protocol.questions import ALREADY_TERMINAL, INVALID_ANSWER, NOT_FOUND, question_id
from owc.sim import model as m
from owc.sim.delivery import Fanout, question_recipients
from owc.sim.devices import js_trim
from owc.sim.script import DEFAULT_ASK_TIMEOUT_S

TOOL = "ask_user"
PENDING, ANSWERED, CANCELLED, EXPIRED = "pending", "answered", "cancelled", "expired"
#: ``timeoutSeconds`` is clamped to this range by the tool (R: the tool; M: 900 s by default and 30 s).
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 30.0, 3600.0
#: A record's ``header`` is cut to this many characters (section 2).
HEADER_MAX = 12
#: A terminal record stays readable this long (``QUESTION_RESOLVED_ENTRY_GRACE_MS``), then ``QUESTION_NOT_FOUND``.
GRACE_S = 15.0
#: ``resolvedBy`` the Gateway itself gives (section 3): a ``chat.send`` answered it; the asking run was aborted.
PLAIN_TEXT = "plain-text"
REQUESTER_INACTIVE = "requester-inactive"
#: The tool's result texts (section 6, measured exactly).
CANCELLED_TEXT = "The question was cancelled; proceed with best judgment."
EXPIRED_TEXT = "No answer arrived; proceed with best judgment."
ABORTED_TEXT = "Aborted"
#: The refusal of the question RPCs to a connection with neither ``operator.questions`` nor ``operator.admin``
#: (section 4, measured with ``details: null``).
ACCESS_REFUSED = "Session-scoped access requires a verified user profile."
#: What the tool says of arguments its schema refuses (section 2, measured: ``ASK_USER_BAD``'s one option).
INVALID_ARGUMENTS = 'Invalid arguments for tool "openclaw:core:ask_user": '
EXPECTED_INPUT = (
    "{ questions: Array<{ header: string; id: string; options: Array<{ label: unknown; description?: unknown }>; "
    "question: string; multiSelect?: boolean }>; timeoutSeconds?: number /* integer */ }"
)
#: One pending question per session (R: ``ask-user-tool-YVvnlVcz.mjs``; not measured).
ALREADY_PENDING = (
    "ask_user already has a pending question for this session; wait for it to resolve before asking another"
)
_QUESTION_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class QuestionError(Exception):
    """A question RPC the manager refuses: ``INVALID_REQUEST`` with ``details.reason`` (section 5)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.message, self.reason = message, reason


# ---------------------------------------------------------------------------------------------- pure helpers


def js_pretty(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``: two-space indents, ``": "`` after keys, non-ASCII kept as is, control
    characters escaped in lower-case hex (the measured result texts end with this)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def clamp_timeout(seconds: float) -> float:
    return min(max(float(seconds), MIN_TIMEOUT_S), MAX_TIMEOUT_S)


def ask_arguments(questions: Sequence[Mapping[str, Any]], timeout_s: float) -> dict[str, Any]:
    """The model's ``ask_user`` arguments for an ``Ask`` step: its questions as given, and ``timeoutSeconds`` when
    it is not the tool's default (a model that leaves it out gets the default)."""
    args: dict[str, Any] = {"questions": [copy.deepcopy(dict(q)) for q in questions]}
    if timeout_s != DEFAULT_ASK_TIMEOUT_S:
        args["timeoutSeconds"] = int(timeout_s) if float(timeout_s).is_integer() else timeout_s
    return args


def item_fields(args: Mapping[str, Any]) -> dict[str, str]:
    """The ``item`` event's title and meta for an ``ask_user`` call (measured: ``"Ask User <first question>"``)."""
    questions = args.get("questions")
    first = questions[0] if isinstance(questions, list) and questions and isinstance(questions[0], dict) else {}
    text = first.get("question") if isinstance(first.get("question"), str) else ""
    return {"title": f"Ask User {text}".rstrip(), "meta": text} if text else {"title": "Ask User"}


def _schema_error(args: Any) -> str | None:
    """The first error of the tool's schema (section 2: 1-3 questions; ``id`` matching ``^[a-z][a-z0-9_]*$``; a
    non-empty ``header``; 2-4 options whose ``label`` is at most 64 characters; closed objects). Only the measured
    one (too few options) is known word for word; the others follow its form."""
    if not isinstance(args, dict):
        return "root: must be object"
    extra = [k for k in args if k not in ("questions", "timeoutSeconds")]
    if extra:
        return "root: must not have additional properties"
    questions = args.get("questions")
    if not isinstance(questions, list):
        return "root: must have required property 'questions'" if questions is None else "questions: must be array"
    if not 1 <= len(questions) <= 3:
        return f"questions: must not have {'fewer than 1' if not questions else 'more than 3'} items"
    for i, q in enumerate(questions):
        at = f"questions.{i}"
        if not isinstance(q, dict):
            return f"{at}: must be object"
        for key in ("header", "id", "options", "question"):
            if key not in q:
                return f"{at}: must have required property '{key}'"
        extra = [k for k in q if k not in ("header", "id", "options", "question", "multiSelect")]
        if extra:
            return f"{at}: must not have additional properties"
        for key in ("header", "id", "question"):
            if not isinstance(q[key], str):
                return f"{at}.{key}: must be string"
        if not _QUESTION_ID.match(q["id"]):
            return f'{at}.id: must match pattern "{_QUESTION_ID.pattern}"'
        if not q["header"]:
            return f"{at}.header: must not have fewer than 1 characters"
        if "multiSelect" in q and not isinstance(q["multiSelect"], bool):
            return f"{at}.multiSelect: must be boolean"
        options = q["options"]
        if not isinstance(options, list):
            return f"{at}.options: must be array"
        if not 2 <= len(options) <= 4:
            return f"{at}.options: must not have {'fewer than 2' if len(options) < 2 else 'more than 4'} items"
        for j, option in enumerate(options):
            where = f"{at}.options.{j}"
            if not isinstance(option, dict) or not isinstance(option.get("label"), str):
                return f"{where}.label: must be string"
            if len(option["label"]) > 64:
                return f"{where}.label: must not have more than 64 characters"
    timeout = args.get("timeoutSeconds")
    integral = isinstance(timeout, int) or (isinstance(timeout, float) and timeout.is_integer())
    if timeout is not None and (isinstance(timeout, bool) or not integral):
        return "timeoutSeconds: must be integer"
    return None


def invalid_arguments(args: Any) -> str | None:
    """The tool's whole refusal text for arguments its schema refuses, None for good ones: the run is told this
    (``isError``) and no question is raised (section 2, measured for ``ASK_USER_BAD``)."""
    error = _schema_error(args)
    return None if error is None else f"{INVALID_ARGUMENTS}{error}. Expected input: {EXPECTED_INPUT}."


def _cut(text: str, limit: int) -> str:
    """``text.slice(0, limit)`` in UTF-16 code units, stopping before a character it would split in two (a lone
    surrogate could not go on the wire)."""
    units, out = 0, []
    for ch in text:
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            break
        out.append(ch)
    return "".join(out)


def canonical_questions(args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's questions from the model's arguments (section 2): trimmed, ``id`` as ``questionId``, the header
    cut to 12, ``multiSelect`` only when true, ``isOther: true`` always (free text is always allowed)."""
    out = []
    for q in args["questions"]:
        options = []
        for option in q["options"]:
            entry = {"label": js_trim(option["label"])}
            description = option.get("description")
            if isinstance(description, str) and js_trim(description):
                entry["description"] = js_trim(description)
            options.append(entry)
        canonical: dict[str, Any] = {
            "questionId": js_trim(q["id"]),
            "header": _cut(js_trim(q["header"]), HEADER_MAX),
            "question": js_trim(q["question"]),
            "options": options,
        }
        if q.get("multiSelect") is True:
            canonical["multiSelect"] = True
        canonical["isOther"] = True
        out.append(canonical)
    return out


def answered_payload(answers: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    return {"status": ANSWERED, "answers": {"answers": {k: list(v) for k, v in answers.items()}}}


def result_of(
    questions: Sequence[Mapping[str, Any]], status: str, answers: Mapping[str, Sequence[str]] | None
) -> tuple[str, dict[str, Any]]:
    """What the tool tells the run when its question ends (section 6, measured): the text and ``details``."""
    if status == ANSWERED:
        assert answers is not None
        lines = [f"{q['header']}: {', '.join(answers.get(q['questionId'], ()))}" for q in questions]
        payload = answered_payload(answers)
        return "\n".join(lines) + "\n\n" + js_pretty(payload), payload
    said = CANCELLED_TEXT if status == CANCELLED else EXPIRED_TEXT
    return f"{said}\n\n{js_pretty({'status': 'no_answer'})}", {"status": "no_answer"}


def canonical_answers(
    questions: Sequence[Mapping[str, Any]], given: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """``validateAnswers`` (section 5, measured messages): every question answered, no other id, one value for a
    single select, no blank value. Values are trimmed; one equal to an option's label (exact, case-sensitive) is that
    label, anything else free text: either way the trimmed value. In the questions' order. Which refusal wins when
    several apply is not measured: unknown ids first, then each question in order."""
    ids = [q["questionId"] for q in questions]
    for qid in given:
        if qid not in ids:
            raise QuestionError(f"question '{qid}' is not part of this request", INVALID_ANSWER)
    out: dict[str, list[str]] = {}
    for q in questions:
        qid = q["questionId"]
        values = [js_trim(v) for v in given.get(qid) or ()]
        if not values:
            raise QuestionError(f"question '{qid}' requires an answer", INVALID_ANSWER)
        if any(not v for v in values):
            raise QuestionError(f"question '{qid}' contains an empty answer", INVALID_ANSWER)
        if len(values) > 1 and not q.get("multiSelect"):
            raise QuestionError(f"question '{qid}' does not allow multiple answers", INVALID_ANSWER)
        out[qid] = values
    return out


def _pick(question: Mapping[str, Any], value: str) -> str:
    """One plain-text value: an option's number (1-based), an option's label (case-insensitive), else free text."""
    options = question["options"]
    if value.isdigit() and 1 <= int(value) <= len(options):
        return str(options[int(value) - 1]["label"])
    for option in options:
        if option["label"].lower() == value.lower():
            return str(option["label"])
    return value


def _values(question: Mapping[str, Any], text: str) -> list[str]:
    parts = re.split(r"[,;\n]", text) if question.get("multiSelect") else [text]
    return [_pick(question, js_trim(p)) for p in parts if js_trim(p)]


def _keyed(questions: Sequence[Mapping[str, Any]], key: str) -> Mapping[str, Any] | None:
    folded = key.lower()
    for i, q in enumerate(questions, 1):
        if folded in (q["questionId"].lower(), q["header"].lower(), q["question"].lower(), str(i)):
            return q
    return None


def answers_from_text(questions: Sequence[Mapping[str, Any]], text: str) -> dict[str, list[str]] | None:
    """A chat message read as the answer (section 9, R ``buildAgentHarnessUserInputAnswers``): one question takes the
    whole text (a multi select split on ``,`` ``;`` or new lines); several take ``<id|header|question|number>:
    <value>`` lines, else one line per question. None when the text answers not every question (modelled: such a
    message is then an ordinary turn)."""
    text = js_trim(text)
    if not text:
        return None
    if len(questions) == 1:
        values = _values(questions[0], text)
        return {questions[0]["questionId"]: values} if values else None
    keyed: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        q = _keyed(questions, js_trim(key)) if sep else None
        if q is not None and _values(q, value):
            keyed[q["questionId"]] = _values(q, value)
    if len(keyed) == len(questions):
        return {q["questionId"]: keyed[q["questionId"]] for q in questions}
    lines = [js_trim(line) for line in text.splitlines() if js_trim(line)]
    if len(lines) == len(questions):
        out = {q["questionId"]: _values(q, line) for q, line in zip(questions, lines)}
        return out if all(out.values()) else None
    return None


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _answers_errors(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["at /answers: must be object"]
    errors = []
    if "answers" not in value:
        errors.append("at /answers: must have required property 'answers'")
    extra = [k for k in value if k != "answers"]
    if extra:
        errors.append(f"at /answers: unexpected property '{extra[0]}'")
    inner = value.get("answers")
    if "answers" in value and not isinstance(inner, dict):
        errors.append("at /answers/answers: must be object")
    elif isinstance(inner, dict):
        for qid, values in inner.items():
            at = f"at /answers/answers/{_pointer(qid)}"
            if not isinstance(values, list):
                errors.append(f"{at}: must be array")
                continue
            errors += [f"{at}/{i}: must be string" for i, v in enumerate(values) if not isinstance(v, str)]
    return errors


def _branch_errors(params: Mapping[str, Any], cancel: bool) -> list[str]:
    """One ``anyOf`` branch's errors in the form the Gateway words them: root required properties bare, root extra
    properties ``at root:`` (the first only, as measured for two), then each property's own."""
    required = ("id", "cancel") if cancel else ("id", "answers")
    allowed = ("id", "cancel", "resolvedBy") if cancel else ("id", "answers", "resolvedBy", "resolutionId")
    errors = [f"must have required property '{k}'" for k in required if k not in params]
    extra = [k for k in params if k not in allowed]
    if extra:
        errors.append(f"at root: unexpected property '{extra[0]}'")
    if "id" in params:
        if not isinstance(params["id"], str):
            errors.append("at /id: must be string")
        elif not params["id"]:
            errors.append("at /id: must not have fewer than 1 characters")
    if cancel and "cancel" in params and params["cancel"] is not True:
        errors.append("at /cancel: must be equal to constant")
    if not cancel and "answers" in params:
        errors += _answers_errors(params["answers"])
    for key in allowed[2:]:
        if key in params and not isinstance(params[key], str):
            errors.append(f"at /{key}: must be string")
    return errors


def resolve_params_error(params: Mapping[str, Any]) -> str | None:
    """Why ``question.resolve``'s params fail its schema (``{id, answers: {answers}, resolvedBy?, resolutionId?}``
    or ``{id, cancel: true, resolvedBy?}``), in the measured words after ``invalid question.resolve params:``;
    None when one branch takes them."""
    answering, cancelling = _branch_errors(params, cancel=False), _branch_errors(params, cancel=True)
    if not answering or not cancelling:
        return None
    return "; ".join([*answering, *cancelling, "must match a schema in anyOf"])


def closed_params_error(params: Mapping[str, Any], required: Sequence[str]) -> str | None:
    """``question.list`` (``{}``) and ``question.get`` (``{id}``): closed objects of required strings."""
    errors = [f"must have required property '{k}'" for k in required if k not in params]
    extra = [k for k in params if k not in required]
    if extra:
        errors.append(f"at root: unexpected property '{extra[0]}'")
    errors += [f"at /{k}: must be string" for k in required if k in params and not isinstance(params[k], str)]
    return "; ".join(errors) or None


# ---------------------------------------------------------------------------------------------- the manager


@attrs.define(eq=False)
class SimQuestion:
    """One record and what the manager keeps beside it: the asking run's tool call, the deadline on Trio's clock,
    the outcome and the tool's result for it (``result``, ``details``), and ``done`` for the waiting run."""

    id: str
    questions: list[dict[str, Any]]
    agent_id: str
    session_key: str
    run_id: str
    call_id: str
    created_at_ms: int
    expires_at_ms: int
    deadline: float
    status: str = PENDING
    answers: dict[str, list[str]] | None = None
    resolved_by: str | None = None
    resolved_at: float | None = None
    result: str | None = None
    details: dict[str, Any] | None = None
    done: trio.Event = attrs.field(factory=trio.Event)
    timer: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    def record(self) -> dict[str, Any]:
        """The record as ``question.requested`` / ``list`` / ``get`` carry it (section 3; exactly these keys while
        pending, then ``answers`` when answered and ``resolvedBy`` when someone gave one)."""
        out: dict[str, Any] = {
            "id": self.id,
            "questions": copy.deepcopy(self.questions),
            "agentId": self.agent_id,
            "sessionKey": self.session_key,
            "runId": self.run_id,
            "createdAtMs": self.created_at_ms,
            "expiresAtMs": self.expires_at_ms,
            "status": self.status,
        }
        if self.answers is not None:
            out["answers"] = {"answers": {k: list(v) for k, v in self.answers.items()}}
        if self.resolved_by is not None:
            out["resolvedBy"] = self.resolved_by
        return out


class Questions:
    """The Gateway's question manager: the records (pending ones, and terminal ones for ``GRACE_S``), their two
    broadcasts, the expiry on Trio's clock, and the answers ``question.resolve`` or a ``chat.send`` give.

    ``settled`` is the asking run's side (``RunDriver`` sets it): told the question ended, it gives the run its
    tool result and says whether the run goes on. ``resolved_after_end``: hold each ``question.resolved`` until the
    asking run has ended (after its ``chat`` terminal), which the real Gateway does at times (section 0, rule 8:
    the event is not ordered against the run's own); by default it follows the tool result at once."""

    def __init__(
        self,
        fanout: Fanout,
        *,
        nursery: trio.Nursery,
        now_ms: Callable[[], int],
        poke: Callable[[], None],
    ) -> None:
        self._fanout = fanout
        self._nursery = nursery
        self._now_ms = now_ms
        self._poke = poke
        self.records: dict[str, SimQuestion] = {}
        self.resolved_after_end = False
        self.settled: Callable[[SimQuestion], bool] = lambda _q: False
        #: The ``chat.send`` run ids that were taken as an answer (run id -> question id): they never became runs.
        self.answered_sends: dict[str, str] = {}
        self._held: dict[str, list[SimQuestion]] = {}  # run id -> questions whose question.resolved waits for its end

    # ------------------------------------------------------------------ reading

    def find(self, qid: str) -> SimQuestion | None:
        """The record ``qid``, None once a terminal one's grace has passed (it is forgotten then)."""
        q = self.records.get(qid)
        if q is not None and q.resolved_at is not None and trio.current_time() >= q.resolved_at + GRACE_S:
            del self.records[qid]
            return None
        return q

    def get(self, qid: str) -> SimQuestion:
        q = self.find(qid)
        if q is None:
            raise QuestionError(f"question '{qid}' was not found", NOT_FOUND)
        return q

    def pending(self) -> list[SimQuestion]:
        """The pending questions, oldest first (``question.list``: pending ones only, sorted by ``createdAtMs``)."""
        return sorted((q for q in self.records.values() if q.status == PENDING), key=lambda q: q.created_at_ms)

    def pending_in_session(self, key: str) -> SimQuestion | None:
        return next((q for q in self.pending() if q.session_key == key), None)

    def pending_of_run(self, run_id: str) -> SimQuestion | None:
        return next((q for q in self.pending() if q.run_id == run_id), None)

    # ------------------------------------------------------------------ raising and ending

    def raise_question(self, run: m.Run, call_id: str, args: Mapping[str, Any], timeout_s: float) -> SimQuestion:
        """Raise the question of ``run``'s ``ask_user`` call ``call_id`` and broadcast ``question.requested``; it
        expires ``timeout_s`` (clamped) later on Trio's clock."""
        timeout = clamp_timeout(timeout_s)
        now = self._now_ms()
        q = SimQuestion(
            id=question_id(run.run_id, call_id),
            questions=canonical_questions(args),
            agent_id=m.agent_id_of(run.key),
            session_key=run.key,
            run_id=run.run_id,
            call_id=call_id,
            created_at_ms=now,
            expires_at_ms=now + int(timeout * 1000),
            deadline=trio.current_time() + timeout,
        )
        self.records[q.id] = q
        self._fanout.emit("question.requested", q.record(), audience=question_recipients, drop_if_slow=False)
        self._nursery.start_soon(self._expire, q)
        self._poke()
        return q

    async def _expire(self, q: SimQuestion) -> None:
        with q.timer:
            await trio.sleep_until(q.deadline)
        if q.status == PENDING and self.records.get(q.id) is q:
            self.settle(q, EXPIRED)

    def settle(
        self,
        q: SimQuestion,
        status: str,
        answers: Mapping[str, Sequence[str]] | None = None,
        resolved_by: str | None = None,
    ) -> None:
        """End ``q`` (answered, cancelled or expired): the run gets its tool result, then every recipient
        ``question.resolved`` (or after the run's end: ``resolved_after_end``), and the run's wait ends."""
        q.status = status
        q.answers = {k: list(v) for k, v in answers.items()} if answers is not None else None
        q.resolved_by = resolved_by
        q.resolved_at = trio.current_time()
        q.timer.cancel()
        q.result, q.details = result_of(q.questions, status, answers)
        goes_on = self.settled(q)
        if goes_on and self.resolved_after_end:
            self._held.setdefault(q.run_id, []).append(q)
        else:
            self._announce(q)
        q.done.set()
        self._poke()

    def _announce(self, q: SimQuestion) -> None:
        payload: dict[str, Any] = {"id": q.id, "status": q.status}
        if q.answers is not None:
            payload["answers"] = {"answers": {k: list(v) for k, v in q.answers.items()}}
        self._fanout.emit("question.resolved", payload, audience=question_recipients, drop_if_slow=False)

    def run_ended(self, run_id: str) -> None:
        """The asking run has ended: the ``question.resolved`` held for it go out now."""
        for q in self._held.pop(run_id, []):
            self._announce(q)

    def lose_all(self) -> None:
        """The Gateway's process ends: the manager is process-local (``QuestionManager.close``), so every record,
        pending or not, is gone, with no ``question.resolved`` (section 3; the restart itself is not measured)."""
        for q in self.records.values():
            q.timer.cancel()
            q.done.set()
        self.records.clear()
        self._held.clear()
        self.answered_sends.clear()
        self._poke()

    # ------------------------------------------------------------------ answering

    def answer(
        self, qid: str, answers: Mapping[str, Sequence[str]], resolved_by: str | None = None
    ) -> dict[str, list[str]]:
        """Answer ``qid`` as ``question.resolve`` does: refused (``QuestionError``, nothing changes) or settled with
        the canonical answers, which it returns."""
        q = self.awaiting(qid)
        canonical = canonical_answers(q.questions, answers)
        self.settle(q, ANSWERED, canonical, resolved_by)
        return canonical

    def cancel(self, qid: str, resolved_by: str | None = None) -> None:
        self.settle(self.awaiting(qid), CANCELLED, resolved_by=resolved_by)

    def awaiting(self, qid: str) -> SimQuestion:
        """The pending question ``qid``, or the refusal to end it (not found, or already terminal)."""
        q = self.get(qid)
        if q.status != PENDING:
            raise QuestionError(f"question '{qid}' is already {q.status}", ALREADY_TERMINAL)
        return q
