"""The question desk (``owc/runs/questions.py``) on its own: the pump shows and closes in the Gateway's order, the
hello's list shows what waits and closes what went, a tab that opens a chat is shown what waits there, and a
person's answer goes to the Gateway only when it is theirs and complete, each refusal one line with its code.

The Gateway here is a stand-in ``request`` answering with the real Gateway's measured shapes and errors
(``docs/measured/ask-user-2026.9.6.md`` section 5); the desk with the simulator and the real Gateway is
``tests/test_sim_questions.py`` / ``tests/test_realgw_questions.py``."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from owc import ids
from owc.emit.asker import RecordingAsker
from owc.gateway.errors import NotConnected, RequestError
from owc.protocol.errors import ErrorShape
from owc.protocol.questions import Option, Question, QuestionRecord, QuestionRequested, QuestionResolved
from owc.runs.questions import QuestionDesk

USER, CHAT = "8d1c2f0e-1111-4222-8333-944455556666", "0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd"
KEY = ids.session_key("main", USER, CHAT)


def record(qid: str = "ask_1", key: str = KEY) -> QuestionRecord:
    q = Question("target", "Target", "Where?", (Option("Staging"), Option("Production")), is_other=True)
    return QuestionRecord(id=qid, questions=(q,), session_key=key, run_id="r1", created_at_ms=1)


def wire(record: QuestionRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "questions": [
            {
                "questionId": "target",
                "header": "Target",
                "question": "Where?",
                "options": [{"label": "Staging"}, {"label": "Production"}],
                "isOther": True,
            }
        ],
        "sessionKey": record.session_key,
        "runId": "r1",
        "createdAtMs": 1,
        "expiresAtMs": 900_001,
        "status": "pending",
    }


class Gateway:
    """Answers ``question.list`` / ``question.resolve`` as the real one does, and records what was sent."""

    def __init__(self, pending: list[QuestionRecord] | None = None, error: Exception | None = None) -> None:
        self.pending = pending or []
        self.error = error
        self.sent: list[tuple[str, Any]] = []

    async def __call__(self, method: str, params: Any = None, **_: Any) -> Any:
        self.sent.append((method, params))
        if self.error is not None:
            raise self.error
        if method == "question.list":
            return {"questions": [wire(r) for r in self.pending]}
        if "cancel" in params:
            return {"status": "cancelled"}
        return {"status": "answered", "answers": params["answers"]}


async def desk_with(gateway: Gateway, nursery: trio.Nursery) -> tuple[QuestionDesk, RecordingAsker]:
    asker = RecordingAsker()
    desk = QuestionDesk(asker, request=gateway)
    await nursery.start(desk.run)
    return desk, asker


async def test_a_question_is_shown_then_closed_in_the_gateways_order(nursery: trio.Nursery) -> None:
    desk, asker = await desk_with(Gateway(), nursery)
    desk.on_event(QuestionRequested(record()))
    desk.on_event(QuestionResolved("ask_1", "answered"))
    await asker.until(lambda: len(asker.calls) == 2)
    assert [(c.kind, c.question_id, c.status) for c in asker.calls] == [
        ("show", "ask_1", None),
        ("close", "ask_1", "answered"),
    ]
    assert asker.calls[0].user_id == USER and asker.calls[0].chat_id == CHAT


async def test_a_question_of_another_session_is_never_shown(nursery: trio.Nursery) -> None:
    desk, asker = await desk_with(Gateway(), nursery)
    desk.on_event(QuestionRequested(record("ask_9", key="agent:main:main")))
    desk.on_event(QuestionRequested(record()))
    await asker.until(lambda: bool(asker.calls))
    assert [c.question_id for c in asker.calls] == ["ask_1"]


async def test_the_hello_list_shows_what_waits_and_closes_what_went(nursery: trio.Nursery) -> None:
    desk, asker = await desk_with(Gateway(), nursery)
    desk.on_event(QuestionRequested(record("ask_gone")))
    await desk.on_hello(Gateway([record("ask_new")]))
    await asker.until(lambda: len(asker.calls) == 3)
    assert [(c.kind, c.question_id, c.status) for c in asker.calls] == [
        ("show", "ask_gone", None),
        ("show", "ask_new", None),
        ("close", "ask_gone", "gone"),
    ]


async def test_a_failed_list_is_one_line_and_changes_nothing(nursery: trio.Nursery, caplog: Any) -> None:
    desk, _asker = await desk_with(Gateway(), nursery)
    desk.on_event(QuestionRequested(record()))
    forbidden = RequestError(
        "question.list", ErrorShape("FORBIDDEN", "Session-scoped access requires a verified user profile.")
    )
    await desk.on_hello(Gateway(error=forbidden))
    await desk.on_hello(Gateway(error=forbidden))
    assert list(desk.book.pending) == ["ask_1"]
    assert sum("questions.list_failed" in r.getMessage() for r in caplog.records) == 1  # once, not per reconnect


async def test_a_tab_that_opens_the_chat_is_shown_what_waits_there_only(nursery: trio.Nursery) -> None:
    desk, asker = await desk_with(Gateway(), nursery)
    desk.on_event(QuestionRequested(record()))
    assert desk.opened(CHAT, USER, "sid-2") == 1
    assert desk.opened(CHAT, "someone-else", "sid-3") == 0
    assert desk.opened("1f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd", USER, "sid-4") == 0
    await asker.until(lambda: len(asker.calls) == 2)
    assert [(c.kind, c.session) for c in asker.calls] == [("show", None), ("show", "sid-2")]


async def test_an_answer_goes_to_the_gateway_trimmed_and_named() -> None:
    gateway = Gateway()
    desk = QuestionDesk(RecordingAsker(), request=gateway)
    desk.book.requested(record())
    outcome = await desk.answer(USER, "ask_1", {"target": [" Production "]})
    assert outcome.ok and outcome.status == "answered"
    assert gateway.sent == [
        (
            "question.resolve",
            {"id": "ask_1", "answers": {"answers": {"target": ["Production"]}}, "resolvedBy": f"openwebui:{USER}"},
        )
    ]


async def test_a_dismissal_cancels_the_question() -> None:
    gateway = Gateway()
    desk = QuestionDesk(RecordingAsker(), request=gateway)
    desk.book.requested(record())
    outcome = await desk.answer(USER, "ask_1", None)
    assert outcome.ok and outcome.status == "cancelled"
    assert gateway.sent == [("question.resolve", {"id": "ask_1", "cancel": True, "resolvedBy": f"openwebui:{USER}"})]


@pytest.mark.parametrize(
    ("user", "qid", "answers", "code", "says"),
    [
        ("intruder", "ask_1", {"target": ["x"]}, 403, "owner"),
        (USER, "ask_9", {"target": ["x"]}, 409, "no longer"),
        (USER, "ask_1", {}, 400, "Please answer"),
        (USER, "ask_1", {"target": ["Staging", "Production"]}, 400, "one answer"),
    ],
)
async def test_what_is_not_theirs_or_not_complete_is_never_sent(
    user: str, qid: str, answers: Any, code: int, says: str
) -> None:
    gateway = Gateway()
    desk = QuestionDesk(RecordingAsker(), request=gateway)
    desk.book.requested(record())
    outcome = await desk.answer(user, qid, answers)
    assert not outcome.ok and outcome.code == code and says in outcome.line
    assert gateway.sent == []


def refusal(reason: str, message: str) -> RequestError:
    return RequestError("question.resolve", ErrorShape("INVALID_REQUEST", message, {"reason": reason}))


@pytest.mark.parametrize(
    ("error", "code", "says"),
    [
        (refusal("QUESTION_ALREADY_TERMINAL", "question 'ask_1' is already answered"), 409, "already answered"),
        (refusal("QUESTION_NOT_FOUND", "question 'ask_1' was not found"), 409, "no longer"),
        (refusal("QUESTION_INVALID_ANSWER", "question 'target' contains an empty answer"), 400, "empty answer"),
        (NotConnected("question.resolve"), 503, "not reachable"),
    ],
)
async def test_the_gateways_refusals_become_one_line_each(error: Exception, code: int, says: str) -> None:
    desk = QuestionDesk(RecordingAsker(), request=Gateway(error=error))
    desk.book.requested(record())
    outcome = await desk.answer(USER, "ask_1", {"target": ["Staging"]})
    assert not outcome.ok and outcome.code == code and says in outcome.line


async def test_a_tab_that_fails_costs_one_line_not_the_next_question(nursery: trio.Nursery, caplog: Any) -> None:
    class Flaky(RecordingAsker):
        async def show(self, chat_id: str, user_id: str, rec: QuestionRecord, *, session: str | None = None) -> int:
            if rec.id == "ask_1":
                raise RuntimeError("tab gone")
            return await super().show(chat_id, user_id, rec, session=session)

    asker = Flaky()
    desk = QuestionDesk(asker, request=Gateway())
    await nursery.start(desk.run)
    desk.on_event(QuestionRequested(record("ask_1")))
    desk.on_event(QuestionRequested(record("ask_2")))
    await asker.until(lambda: bool(asker.calls))
    assert [c.question_id for c in asker.calls] == ["ask_2"]
    assert any("questions.tab_failed" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------------------------- races (review h13)
# The reader dispatches every frame it has before the task awaiting a response runs again: a live event that
# follows the hello's ``question.list`` answer on the wire is handled before that list.


async def test_a_question_raised_right_after_the_list_snapshot_is_not_closed_as_gone(nursery: trio.Nursery) -> None:
    desk, asker = await desk_with(Gateway(), nursery)

    async def gateway(method: str, params: Any = None, **_: Any) -> Any:
        desk.on_event(QuestionRequested(record("ask_new")))  # read before the list's answer is acted on
        return {"questions": []}

    await desk.on_hello(gateway)
    await asker.until(lambda: bool(asker.calls))
    await trio.testing.wait_all_tasks_blocked()
    assert list(desk.book.pending) == ["ask_new"] and not asker.closed()


async def test_a_question_resolved_right_after_the_list_snapshot_is_not_shown_again(nursery: trio.Nursery) -> None:
    desk, asker = await desk_with(Gateway(), nursery)
    desk.on_event(QuestionRequested(record("ask_old")))

    async def gateway(method: str, params: Any = None, **_: Any) -> Any:
        desk.on_event(QuestionResolved("ask_old", "answered"))
        return {"questions": [wire(record("ask_old"))]}

    await desk.on_hello(gateway)
    await asker.until(lambda: bool(asker.closed()))
    await trio.testing.wait_all_tasks_blocked()
    assert "ask_old" not in desk.book.pending
    assert [(c.kind, c.question_id) for c in asker.calls] == [("show", "ask_old"), ("close", "ask_old")]


async def test_an_answer_closes_the_dialogs_at_once_and_the_late_resolved_changes_nothing(
    nursery: trio.Nursery,
) -> None:
    desk, asker = await desk_with(Gateway(), nursery)
    desk.on_event(QuestionRequested(record()))
    outcome = await desk.answer(USER, "ask_1", {"target": ["Staging"]})
    assert outcome.ok
    await asker.until(lambda: bool(asker.closed()))
    assert desk.opened(CHAT, USER, "sid-late") == 0  # a tab opened before question.resolved is not shown it
    desk.on_event(QuestionResolved("ask_1", "answered"))  # the Gateway's event, seconds later
    await trio.testing.wait_all_tasks_blocked()
    assert [(c.kind, c.status) for c in asker.calls] == [("show", None), ("close", "answered")]
