"""The Gateway's questions, pure parts (issue 27): the record and events as the real Gateway sends them, the book
that says which tab shows what (cell by cell), the answer checks, the Ask User card, and the page dialog's code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import orjson
import pytest

from owc import ids
from owc.owui.question_dialog import ELEMENT_PREFIX, close_code, open_code, record_data
from owc.owui.questions import parse_body
from owc.protocol import EventDecoder
from owc.protocol.errors import ProtocolError
from owc.protocol.frames import EventFrame
from owc.protocol.questions import (
    Option,
    Question,
    QuestionRecord,
    QuestionRequested,
    QuestionResolved,
    cancel_params,
    parse_list,
    parse_record,
    question_id,
    resolve_params,
)
from owc.render import ask_card
from owc.rules.questions import GONE, Asked, Close, QuestionBook, Show, check_answers, closing_line, place

ROOT = Path(__file__).resolve().parents[1]
FRAMES = ROOT / "docs/measured/ask-user-2026.9.6-frames.md"
USER = "8d1c2f0e-1111-4222-8333-944455556666"
CHAT = "0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd"
KEY = ids.session_key("main", USER, CHAT)


def real_frames(event: str) -> list[dict]:
    out = []
    for line in FRAMES.read_text().splitlines():
        m = re.match(r"\s*[\d.]+ <- (\{.*\})$", line)
        if m:
            frame = orjson.loads(m.group(1))
            if frame.get("event") == event:
                out.append(frame)
    return out


def record(qid: str = "ask_1", *, key: str = KEY, created: int = 1, **question: object) -> QuestionRecord:
    q = Question(
        question_id=str(question.get("question_id", "target")),
        header=str(question.get("header", "Target")),
        question="Where should this deploy?",
        options=(Option("Staging"), Option("Production")),
        multi_select=bool(question.get("multi", False)),
        is_other=bool(question.get("other", True)),
    )
    return QuestionRecord(id=qid, questions=(q,), session_key=key, run_id="r1", created_at_ms=created)


# ---------------------------------------------------------------------------------------------- the protocol


def test_real_question_requested_frames_parse_to_records() -> None:
    frames = real_frames("question.requested")
    assert len(frames) >= 6
    decoder = EventDecoder()
    for frame in frames:
        event = decoder.decode(EventFrame(event=frame["event"], payload=frame["payload"], seq=frame.get("seq")))
        assert isinstance(event, QuestionRequested)
        rec = event.record
        assert rec.id == frame["payload"]["id"] and rec.status == "pending"
        assert rec.session_key == frame["payload"]["sessionKey"] and rec.run_id == frame["payload"]["runId"]
        assert rec.expires_at_ms - rec.created_at_ms in (900_000, 30_000)
        assert all(q.is_other for q in rec.questions)  # every ask_user question takes free text
        assert 1 <= len(rec.questions) <= 3


def test_real_question_id_is_derived_from_run_and_call() -> None:
    # The probe's run called ask_user with the call id "call_ask1" in direct mode and
    # "tool_search_code:call_ask1:ask_user:1" through Tool Search: one of the two names each real question.
    for frame in real_frames("question.requested"):
        p = frame["payload"]
        assert p["id"] in {question_id(p["runId"], c) for c in ("call_ask1", "tool_search_code:call_ask1:ask_user:1")}


def test_real_question_resolved_frames_parse() -> None:
    frames = real_frames("question.resolved")
    statuses = set()
    for frame in frames:
        event = EventDecoder().decode(EventFrame(event=frame["event"], payload=frame["payload"], seq=frame.get("seq")))
        assert isinstance(event, QuestionResolved)
        statuses.add(event.status)
        if event.status == "answered":
            assert event.answers == {k: tuple(v) for k, v in frame["payload"]["answers"]["answers"].items()}
    assert statuses == {"answered", "cancelled", "expired"}


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"id": "q", "questions": []}, "1-3 questions"),
        ({"id": "q", "questions": [{"questionId": "a", "question": "x"}] * 4}, "1-3 questions"),
        ({"id": "q", "questions": [{"question": "x"}]}, "questionId"),
        ({"id": "q", "questions": [{"questionId": "a", "question": "x"}], "status": "odd"}, "status"),
        ({"questions": [{"questionId": "a", "question": "x"}]}, "'id'"),
    ],
)
def test_a_record_owc_cannot_show_is_refused_with_its_field(payload: dict, says: str) -> None:
    with pytest.raises(ProtocolError, match=says):
        parse_record(payload)


def test_a_bad_record_in_the_list_costs_only_itself() -> None:
    good = {"id": "q1", "questions": [{"questionId": "a", "question": "x", "options": [{"label": "A"}]}]}
    records, bad = parse_list({"questions": [good, {"id": "q2", "questions": []}]})
    assert [r.id for r in records] == ["q1"] and len(bad) == 1 and "q" in bad[0]


def test_resolve_params_use_the_nested_envelope_the_gateway_takes() -> None:
    assert resolve_params("q", {"a": ("x",)}, "owc") == {
        "id": "q",
        "answers": {"answers": {"a": ["x"]}},
        "resolvedBy": "owc",
    }
    assert cancel_params("q", "owc") == {"id": "q", "cancel": True, "resolvedBy": "owc"}


# ---------------------------------------------------------------------------------------------- the book


def test_place_is_the_chat_and_its_owner_and_nothing_else() -> None:
    assert place(record()) == (CHAT, USER)
    assert place(record(key="agent:main:main")) is None
    assert place(record(key="agent:main:telegram-123")) is None


def test_book_shows_a_chat_question_once_to_its_owner() -> None:
    book = QuestionBook()
    assert book.requested(record()) == (Show(CHAT, USER, record()),)
    assert book.on_chat(CHAT, USER) == (record(),)
    assert book.on_chat(CHAT, "someone-else") == ()


def test_book_never_shows_a_question_from_another_session() -> None:
    book = QuestionBook()
    assert book.requested(record(key="agent:main:cron:nightly")) == ()
    assert book.pending == {}


def test_book_closes_on_resolved_and_forgets() -> None:
    book = QuestionBook()
    book.requested(record())
    assert book.resolved("ask_1", "answered") == (Close(CHAT, USER, "ask_1", "answered"),)
    assert book.resolved("ask_1", "answered") == ()  # a second resolved (another worker's) closes nothing more
    assert book.on_chat(CHAT) == ()


def test_book_ignores_resolved_for_a_question_it_never_held() -> None:
    assert QuestionBook().resolved("ask_x", "expired") == ()


def test_listed_shows_every_pending_again_and_closes_the_ones_gone() -> None:
    book = QuestionBook()
    book.requested(record("ask_1"))
    book.requested(record("ask_2"))
    effects = book.listed([record("ask_2"), record("ask_3")])
    assert effects == (
        Show(CHAT, USER, record("ask_2")),
        Show(CHAT, USER, record("ask_3")),
        Close(CHAT, USER, "ask_1", GONE),
    )
    assert set(book.pending) == {"ask_2", "ask_3"}


def test_listed_empty_after_a_gateway_restart_closes_everything() -> None:
    book = QuestionBook()
    book.requested(record("ask_1"))
    assert book.listed([]) == (Close(CHAT, USER, "ask_1", GONE),)


def test_on_chat_is_oldest_first() -> None:
    book = QuestionBook()
    book.requested(record("ask_b", created=2))
    book.requested(record("ask_a", created=5))
    book.requested(record("ask_c", created=1))
    assert [r.id for r in book.on_chat(CHAT)] == ["ask_c", "ask_b", "ask_a"]


def test_may_answer_only_the_owner_and_only_while_pending() -> None:
    book = QuestionBook()
    book.requested(record())
    assert isinstance(book.may_answer("ask_1", USER), Asked)
    assert "owner" in book.may_answer("ask_1", "intruder")
    assert "no longer" in book.may_answer("ask_9", USER)


# ---------------------------------------------------------------------------------------------- answers


def test_check_answers_trims_and_keeps_order() -> None:
    rec = record(multi=True)
    assert check_answers(rec, {"target": [" Production ", "my own", " "]}) == {"target": ("Production", "my own")}


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        ({}, "Please answer “Target”"),
        ({"target": ["  "]}, "Please answer"),
        ({"target": ["Staging", "Production"]}, "takes one answer"),
        ({"target": ["Staging"], "other": ["x"]}, "not asked"),
    ],
)
def test_check_answers_refuses_what_the_gateway_would(answers: dict, says: str) -> None:
    assert says in check_answers(record(), answers)


def test_check_answers_refuses_free_text_where_other_is_not_offered() -> None:
    assert "pick one" in check_answers(record(other=False), {"target": ["elsewhere"]})
    assert check_answers(record(other=False), {"target": ["Staging"]}) == {"target": ("Staging",)}


def test_closing_lines_say_what_became_of_it() -> None:
    assert closing_line("cancelled") == "Dismissed."
    assert closing_line("expired").startswith("Expired")
    assert closing_line(GONE).startswith("No longer")


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b'{"cancel": true}', None),
        (b'{"answers": {"a": ["x", "y"]}}', {"a": ["x", "y"]}),
        (b"not json", "not JSON"),
        (b"[]", "object"),
        (b'{"answers": {}}', "answers"),
        (b'{"answers": {"a": "x"}}', "list"),
        (b'{"answers": {"a": [1]}}', "text"),
        (b'{"cancel": true, "answers": {"a": ["x"]}}', {"a": ["x"]}),
        (b'{"answers": {"a": ["' + b"x" * 5000 + b'"]}}', "at most"),
    ],
)
def test_the_route_body_is_checked_before_anything_is_sent(body: bytes, want: object) -> None:
    got = parse_body(body)
    if isinstance(want, str):
        assert isinstance(got, str) and want in got
    else:
        assert got == want


# ---------------------------------------------------------------------------------------------- the card

ANSWERED = (
    'Target: production\nFeatures: Metrics, Logging\n\n{\n  "status": "answered",\n  "answers": {\n    "answers": {\n'
    '      "deploy_target": [\n        "production"\n      ]\n    }\n  }\n}'
)
CANCELLED = 'The question was cancelled; proceed with best judgment.\n\n{\n  "status": "no_answer"\n}'
EXPIRED = 'No answer arrived; proceed with best judgment.\n\n{\n  "status": "no_answer"\n}'
ARGS = {"questions": [{"id": "deploy_target", "header": "Target", "question": "Where?", "options": []}]}


def wrapped(text: str) -> str:
    inner = {"content": [{"type": "text", "text": text}], "details": {}}
    return orjson.dumps({"tool": {"id": "openclaw:core:ask_user", "name": "ask_user"}, "result": inner}).decode()


@pytest.mark.parametrize(
    ("text", "is_error", "shown"),
    [
        (ANSWERED, False, "Answered:\nTarget: production\nFeatures: Metrics, Logging"),
        (CANCELLED, False, ask_card.DISMISSED),
        (EXPIRED, False, ask_card.EXPIRED),
        ("Aborted", True, ask_card.STOPPED),
    ],
)
def test_the_card_says_what_was_answered_in_both_shapes(text: str, is_error: bool, shown: str) -> None:
    direct = ask_card.view("ask_user", ARGS, text, is_error=is_error)
    search = ask_card.view("tool_call", {"id": "ask_user", "args": ARGS}, wrapped(text), is_error=is_error)
    assert direct == search == ask_card.CardView(ask_card.NAME, ARGS, shown)


def test_a_pending_card_has_its_questions_and_no_result() -> None:
    assert ask_card.view("ask_user", ARGS, None) == ask_card.CardView("Ask User", ARGS, None)


def test_other_tools_are_shown_as_they_are() -> None:
    assert ask_card.view("read", {"path": "x"}, "text") == ask_card.CardView("read", {"path": "x"}, "text")
    assert ask_card.view("tool_call", {"id": "web_search"}, "r") == ask_card.CardView(
        "tool_call", {"id": "web_search"}, "r"
    )


def test_a_refused_ask_keeps_the_gateways_error() -> None:
    text = 'Invalid arguments for tool "openclaw:core:ask_user": questions.0.options: must not have fewer than 2 items.'
    assert ask_card.view("ask_user", ARGS, text, is_error=True).result == text


# ---------------------------------------------------------------------------------------------- the dialog

HOSTILE = '</script><img src=x onerror="alert(1)">&\u2028'


def hostile_record() -> QuestionRecord:
    q = Question("q1", HOSTILE, HOSTILE, (Option(HOSTILE, HOSTILE), Option("B")), multi_select=True, is_other=True)
    return QuestionRecord(id="ask_1", questions=(q,), session_key=KEY, agent_id=HOSTILE, expires_at_ms=10)


def test_the_dialog_embeds_gateway_values_as_escaped_data_only() -> None:
    code = open_code(hostile_record())
    assert "<" not in code.split("const q = ", 1)[1].split("\n", 1)[0]  # the data line holds no raw markup
    assert "\u2028" not in code
    assert ".innerHTML" not in code and "insertAdjacentHTML" not in code  # values only ever go in as text
    data = orjson.loads(code.split("const q = ", 1)[1].split(";\n", 1)[0])
    assert data == {**record_data(hostile_record()), "chat": ""}


def test_the_dialog_code_is_valid_javascript_and_keyed_by_the_question(tmp_path: Path) -> None:
    code = open_code(hostile_record())
    assert f"const prefix = {orjson.dumps(ELEMENT_PREFIX).decode()}" in code
    check = tmp_path / "check.js"
    check.write_text(
        "new Function('return (async () => {' + require('fs').readFileSync(process.argv[2], 'utf8') + '})');\n"
    )
    for snippet in (code, close_code("ask_1", "Answered.")):
        source = tmp_path / "s.js"
        source.write_text(snippet)
        subprocess.run(["node", str(check), str(source)], check=True)


# ---------------------------------------------------------------------------------------------- the status line


def test_an_ask_waits_for_an_answer_in_the_status_line_and_closes_in_words() -> None:
    from owc.render import status

    line = status.tool_line(ask_card.NAME)
    assert line.description == "Waiting for your answer..."
    assert status.ending(line).description == "Question closed"
    reread = status.open_line(status.entry(line, done=False))  # as a later process reads it from the message
    assert reread == line and status.ending(reread).description == "Question closed"
    assert status.tool_line("read").description == "Running read..."


def test_the_running_tool_is_the_ask_card_in_both_shapes() -> None:
    from owc.protocol import AgentEvent
    from owc.render.turn import TurnRenderer

    for name, args in (("ask_user", ARGS), ("tool_call", {"id": "ask_user", "args": ARGS})):
        renderer = TurnRenderer("r1")
        data = {"phase": "start", "name": name, "toolCallId": "call_ask1", "args": args}
        renderer.feed(AgentEvent(run_id="r1", stream="tool", data=data, tool=_tool(data)))
        assert renderer.running_tool == ask_card.NAME
        nested = {"phase": "start", "name": "ask_user", "toolCallId": "tool_search_code:call_ask1:ask_user:1"}
        nested["parentToolCallId"] = "call_ask1"
        renderer.feed(AgentEvent(run_id="r1", stream="tool", data=nested, tool=_tool(nested)))
        assert renderer.tool_count == 1  # the nested call is the parent's card, not one of its own


def _tool(data: dict):
    from owc.protocol.events import _tool as parse

    return parse(data)


def test_placeholders_in_the_models_words_are_never_filled(tmp_path: Path) -> None:
    """Review h13: the code's placeholders were filled one after another, so a question saying ``__PREFIX__`` got the
    next value pasted into it and the dialog's code broke (the page swallowed the error: no dialog at all)."""
    words = "Use __PREFIX__ or __PATH__ or __DATA__ or __LINE__ or __ID__?"
    q = Question("q1", words, words, (Option(words), Option("B")), is_other=True)
    rec = QuestionRecord(id="ask___ID__", questions=(q,), session_key=KEY, agent_id=words)
    code = open_code(rec, CHAT)
    data = orjson.loads(code.split("const q = ", 1)[1].split(";\n", 1)[0])
    assert data == {**record_data(rec), "chat": CHAT}  # the words arrive as they were said
    check = tmp_path / "check.js"
    check.write_text(
        "new Function('return (async () => {' + require('fs').readFileSync(process.argv[2], 'utf8') + '})');\n"
    )
    for snippet in (code, close_code(rec.id, words)):
        source = tmp_path / "s.js"
        source.write_text(snippet)
        subprocess.run(["node", str(check), str(source)], check=True)
    assert f"document.getElementById({orjson.dumps(ELEMENT_PREFIX + rec.id).decode()})" in close_code(rec.id, words)
