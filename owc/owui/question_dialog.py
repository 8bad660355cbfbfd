"""The Gateway's question as a dialog in Open WebUI's page: the code of the ``execute`` events that open and close
it. Pure (strings only); ``owc.owui.questions`` sends them.

Why a page dialog and not ``__event_call__``'s ``input``/``confirmation`` (measured and read in Open WebUI
0.12.4, NOTES "Issue 27"): an event call is ``sio.call`` to **one** session, answered only to the worker that
called, with a timeout of Open WebUI's (not the Gateway's ``expiresAtMs``), and nothing can close it in the other
tabs once one tab answered. A question must show in every tab on the chat, close in all when answered in one,
come back on a reload, and wait as long as the Gateway waits. So the dialog is built in the page by an
``execute`` event (which the page runs for the chat it shows), keyed by the question id (sent twice, it is one
dialog), and the answer goes back by ``fetch`` to owc's route in whichever worker the request reaches
(``owc.owui.questions.ROUTE``), which resolves it with its own Gateway connection: no answer has to find the
process that asked.

Every value from the Gateway (question, header, option labels and descriptions) is data: it is embedded as JSON
(with ``<``, ``>``, ``&`` and the JS line separators escaped) and set with ``textContent``, never as markup.
The look is Open WebUI's own (its Tailwind classes, dark mode included); it is a panel above the composer, not
a modal: the reply stays readable and Stop stays reachable while the question waits.
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Any

import orjson

from owc.protocol.questions import QuestionRecord

#: Where the dialog posts its answer (``owc.owui.questions`` serves it).
ANSWER_PATH = "/api/owc/questions/"
ELEMENT_PREFIX = "owc-question-"


def _json(value: Any) -> str:
    text = orjson.dumps(value).decode()
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def _who(agent_id: str | None) -> str:
    """Who asks, as the model picker names it: "OpenClaw" (the default agent), or "OpenClaw (<agent>)"."""
    return "OpenClaw" if agent_id in (None, "", "main") else f"OpenClaw ({agent_id})"


def record_data(record: QuestionRecord, agent: str | None = None) -> dict[str, Any]:
    return {
        "id": record.id,
        "agent": agent or _who(record.agent_id),
        "expiresAtMs": record.expires_at_ms,
        "questions": [
            {
                "id": q.question_id,
                "header": q.header,
                "question": q.question,
                "options": [{"label": o.label, "description": o.description or ""} for o in q.options],
                "multi": q.multi_select,
                "other": q.is_other or not q.options,
                "secret": q.is_secret,
            }
            for q in record.questions
        ],
    }


def open_code(record: QuestionRecord, chat_id: str = "", agent: str | None = None) -> str:
    """The ``execute`` code that opens ``record``'s dialog in a page showing chat ``chat_id`` (nothing if the page
    shows it already, or shows another chat)."""
    data = {**record_data(record, agent), "chat": chat_id}
    return _fill(_OPEN, {"DATA": _json(data), "PATH": _json(ANSWER_PATH), "PREFIX": _json(ELEMENT_PREFIX)})


def close_code(question_id: str, line: str) -> str:
    """The ``execute`` code that closes the dialog of ``question_id`` in this page, if it shows it. It returns
    ``line`` (what became of the question) with whether it closed one: for the record of the call, not shown."""
    return _fill(_CLOSE, {"ID": _json(ELEMENT_PREFIX + question_id), "LINE": _json(line)})


_PLACEHOLDER = re.compile(r"__([A-Z]+)__")


def _fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``__NAME__`` replaced in one pass: a value (the model's words) that holds a
    placeholder's name is never filled again (it once broke the dialog's code: a question saying ``__PREFIX__``)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


_CLOSE = """
const el = document.getElementById(__ID__);
if (el) { el.dataset.closedBy = 'gateway'; el.remove(); }
return {closed: !!el, line: __LINE__};
"""

#: The dialog's code (``question_dialog.js``, shipped with the package), read once.
_OPEN = (files("owc.owui") / "question_dialog.js").read_text(encoding="utf-8")
