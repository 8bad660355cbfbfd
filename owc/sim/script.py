"""Steps a simulated model plays for a run, and the default responder.

A run the simulator starts by itself (a ``chat.send`` from a client, a restart recovery at boot) plays a list
of steps. Tests and scenario files drive other runs step by step through the same ``SimRun`` methods.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs

#: The offline Gateway's fake model answers every turn with this text (reference offline-gateway).
CANNED_ANSWER = "Hello from the fake model. This is a canned answer."
#: What the real ``read`` tool answered the fake model's argument-less call with (frames_tool.jsonl).
READ_VALIDATION_ERROR = (
    'Validation failed for tool "read":\n  - path: must have required properties path\n\nReceived arguments:\n{}'
)
#: ``ask_user``'s wait when the model gives no ``timeoutSeconds`` (docs/measured/ask-user-2026.9.6.md section 2).
DEFAULT_ASK_TIMEOUT_S = 900.0
#: The questions the offline Gateway's fake model asks (``tests/realgw/fake_model.py`` ``QUESTIONS``), in the tool's
#: model-facing shape: a single select, a multi select and another single select.
ASK_QUESTIONS: tuple[dict[str, Any], ...] = (
    {
        "id": "deploy_target",
        "header": "Target",
        "question": "Where should this deploy?",
        "options": [
            {"label": "Staging (Recommended)", "description": "The safe default."},
            {"label": "Production"},
        ],
    },
    {
        "id": "features",
        "header": "Features",
        "question": "Which features should be enabled?",
        "options": [{"label": "Logging"}, {"label": "Metrics"}, {"label": "Tracing"}],
        "multiSelect": True,
    },
    {
        "id": "region",
        "header": "Region",
        "question": "Which region should host it?",
        "options": [{"label": "eu-west"}, {"label": "us-east"}, {"label": "ap-south"}, {"label": "sa-east"}],
    },
)
#: What the fake model says after ``ask_user``'s result: this, then the result's text verbatim.
ASK_REPLY_PREFIX = "The ask_user tool said: "
#: ``SPAWN_CHILD`` (the offline Gateway's fake model, ``tests/realgw/fake_model.py``): the parent spawns a sub-agent
#: labelled ``CHILD_LABEL`` whose run calls ``exec`` for ``CHILD_SLEEP`` seconds and answers ``CHILD_DONE``; the
#: parent, after the spawn's result, says ``SPAWNED``.
CHILD_TASK = "CHILD_WORK: run a short command and report."
CHILD_LABEL = "test-child"
CHILD_SLEEP = 3.0
CHILD_DONE = "CHILD DONE: the command ran."
SPAWNED = "PARENT: the sub-agent is on it."
_ASK = re.compile(r"ASK_USER(?:_(BAD)|_([123]))?(?:_T(\d+))?")


@attrs.frozen
class Text:
    """Assistant text, streamed as one delta per chunk (``chunks`` splits it on spaces by default)."""

    text: str
    chunks: tuple[str, ...] | None = None

    def deltas(self) -> tuple[str, ...]:
        if self.chunks is not None:
            return self.chunks
        words = self.text.split(" ")
        return tuple(w if i == 0 else " " + w for i, w in enumerate(words) if w or i == 0)


@attrs.frozen
class Tool:
    """A tool call: started, then its result. ``seconds``: how long the tool runs (Trio's clock) between the two, as
    a real ``exec`` does; ``hold``: it runs until the test calls ``SimRun.release`` (a sub-agent held mid-tool, so
    a test sees it running that tool). Both: the time first, then the hold."""

    name: str
    args: Any = attrs.field(factory=dict)
    result: Any = ""
    is_error: bool = False
    call_id: str | None = None
    seconds: float = 0.0
    hold: bool = False


@attrs.frozen
class Hold:
    """Keep the run active until the test (or a ``chat.abort``) ends it: a model that is still thinking."""


@attrs.frozen
class Delay:
    """Wait ``seconds`` on Trio's clock (MockClock in tests) between steps."""

    seconds: float


@attrs.frozen
class Ask:
    """The model calls the Gateway's ``ask_user`` tool (offered directly, as with ``tools.toolSearch: false``) with
    ``questions`` in the model's form (``{id, header, question, options: [{label, description?}], multiSelect?}``)
    and waits for the answer: the run raises the question and plays nothing more until it is answered, cancelled,
    expired (``timeout_s`` on Trio's clock, clamped to 30..3600 s as the tool does) or the run is aborted. The
    arguments carry ``timeoutSeconds`` only when ``timeout_s`` is not the default. Arguments the tool refuses (say
    one option) give an error result and no question. A ``Then`` after it reads what the tool said."""

    questions: tuple[dict[str, Any], ...]
    timeout_s: float = DEFAULT_ASK_TIMEOUT_S
    call_id: str | None = None


@attrs.frozen
class Then:
    """Steps decided when the run gets here: ``build(told)`` gets the text of the last tool result (an ``Ask``'s
    once it ends) and returns what the model does next. A model's next turn depends on what its tool said, which a
    script written before the run cannot know (the answer to an ``Ask``)."""

    build: Callable[[str], Sequence[Step]]


@attrs.frozen
class Media:
    """A standalone ``MEDIA:<name>`` line in the model's answer, and what the Gateway did with the file: delivered
    (``refused`` None: kept in its managed media, a block added to the run's message after its final) or refused
    with that ``attachment_error`` code (``unsupported-format``, ``file-not-found``, ``delivery-failed``). The
    Gateway's own checks are not modelled: the script says their outcome (``owc.sim.media``)."""

    name: str
    mime: str
    data: bytes = b""
    refused: str | None = None


@attrs.frozen
class Spawn:
    """The model spawns a sub-agent with its ``sessions_spawn`` tool (``owc.sim.tasks``): the tool answers at once
    (``accepted``, the child's key and run id), a task record is made, and the child session runs a run of its own
    playing ``steps`` (None: nobody plays it; drive it through ``sim.tasks``' handle). When the child ends, the
    parent's key gets the announce run, playing ``announce`` (None: what the parent's responder answers the
    announce's text). ``label`` is the task's title (else the task text)."""

    task: str
    label: str | None = None
    steps: tuple[Step, ...] | None = None
    announce: tuple[Step, ...] | None = None
    call_id: str | None = None


@attrs.frozen
class End:
    state: str = "final"  # final | error | aborted
    yielded: bool = False
    error: str | None = None
    stop_reason: str | None = None


Step = Text | Tool | Hold | Delay | End | Ask | Then | Media | Spawn
#: ``(session_key, message) -> steps`` for a ``chat.send`` run.
Responder = Callable[[str, str], Sequence[Step]]
#: ``(session_key, source_run_id) -> steps`` for a restart-recovery run.
RecoveryScript = Callable[[str, str | None], Sequence[Step]]


def ask_user_step(message: str) -> Ask | None:
    """The ``ask_user`` call the fake model makes for ``message`` (None: no ``ASK_USER`` trigger): ``ASK_USER`` asks
    the first two ``ASK_QUESTIONS``, ``ASK_USER_1|2|3`` that many, ``_T<seconds>`` sets ``timeoutSeconds``, and
    ``ASK_USER_BAD`` gives the first question one option, which the tool refuses."""
    match = _ASK.search(message)
    if match is None:
        return None
    bad, count, timeout = match.groups()
    if bad:
        questions = ({**ASK_QUESTIONS[0], "options": ASK_QUESTIONS[0]["options"][:1]},)
    else:
        questions = tuple(dict(q) for q in ASK_QUESTIONS[: int(count or 2)])
    return Ask(questions, float(timeout) if timeout else DEFAULT_ASK_TIMEOUT_S, call_id="call_ask1")


def say_what_the_tool_said(told: str) -> list[Step]:
    """The fake model's answer after ``ask_user``'s result: ``ASK_REPLY_PREFIX`` and the result's text, verbatim, in
    one delta (as the fake model streams it; the text's own runs of spaces must survive)."""
    text = ASK_REPLY_PREFIX + told
    return [Text(text, (text,)), End()]


def fake_model_responder(session_key: str, message: str) -> Sequence[Step]:
    """Behaves like the offline Gateway's fake model: ``USE_TOOL`` makes it call ``read`` once (which the
    real tool rejects) before answering; ``ECHO_TOOL`` says the answer's first word before that call (so the
    answer starts with an earlier item's text); ``SLOW`` makes it start answering and then hold (after two
    words with ``ECHO_TOOL``: the conformance tier stops it there); ``SPAWN_CHILD`` spawns a sub-agent (``Spawn``) that
    runs ``exec`` for ``CHILD_SLEEP`` seconds on Trio's clock; ``ASK_USER`` (and its variants,
    ``ask_user_step``) asks the user through ``ask_user`` and then says what the tool said."""
    steps: list[Step] = []
    echo = "ECHO_TOOL" in message
    ask = None if echo or "USE_TOOL" in message else ask_user_step(message)
    if ask is not None:
        return [ask, Then(say_what_the_tool_said)]
    if echo:
        steps.append(Text(CANNED_ANSWER.split(" ")[0]))
    if "USE_TOOL" in message or echo:
        steps.append(Tool("read", {}, result=READ_VALIDATION_ERROR, is_error=True, call_id="call_fake1"))
    if "SPAWN_CHILD" in message and not steps:
        child = (
            Tool("exec", {"command": f"sleep {CHILD_SLEEP:g}; echo child-ok"}, "child-ok", seconds=CHILD_SLEEP),
            Text(CHILD_DONE),
            End(),
        )
        return [Spawn(CHILD_TASK, CHILD_LABEL, child, call_id="call_spawn"), Text(SPAWNED), End()]
    if "SLOW" in message:
        return [*steps, Text("Hello from" if echo else "Hello"), Hold()]
    return [*steps, Text(CANNED_ANSWER), End()]


def default_recovery(session_key: str, source_run_id: str | None) -> Sequence[Step]:
    return [Text("Recovered after the Gateway restart."), End()]
