"""Which tab shows which of the Gateway's questions, and who may answer it: a pure book, held as data.

The Gateway owns a question's life (it raises it, expires it on its own clock, resolves it once); owc only shows
it and passes answers on. So the book is fed three inputs, each from the Gateway: ``requested`` (the live event),
``resolved`` (the live event) and ``listed`` (``question.list`` at every hello: events are not replayed, so this
is how a question raised or resolved while owc was away is found). Each input returns the effects for the tabs:
``Show`` a record on its chat, ``Close`` it. Showing is idempotent in the page (a dialog is keyed by the question
id), so a record shown twice (a live event, then the next hello's list) is one dialog.

Only a question on an Open WebUI chat's session key (``agent:<agent>:openwebui-<user>-<chat>``) is ever shown,
and only to its chat's owner (the key's user): a question from any other session (a channel, a cron key, another
user's chat) is never shown here, and nobody else may answer it (``may_answer``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from owc import ids
from owc.protocol.questions import CANCELLED, EXPIRED, QuestionRecord

#: ``Close.status`` for a question the Gateway no longer lists (it restarted, or it was resolved while owc was away).
GONE = "gone"


@attrs.frozen
class Show:
    chat_id: str
    user_id: str
    record: QuestionRecord


@attrs.frozen
class Close:
    chat_id: str
    user_id: str
    question_id: str
    status: str


Effect = Show | Close


@attrs.frozen
class Asked:
    """A question the book holds: its record and the chat and user it belongs to."""

    record: QuestionRecord
    chat_id: str
    user_id: str


def place(record: QuestionRecord) -> tuple[str, str] | None:
    """The (chat, user) a record belongs to, or None: not an Open WebUI chat's session."""
    ref = ids.parse_session_key(record.session_key) if record.session_key else None
    return None if ref is None else (ref.chat_id, ref.user_id)


@attrs.define
class QuestionBook:
    pending: dict[str, Asked] = attrs.field(factory=dict)
    #: While a ``question.list`` is on its way (``list_started`` to ``listed``): what the live events said of each
    #: question meanwhile. The list is a snapshot taken somewhere in that window; an event read before its answer
    #: may be newer than it, so what an event said wins over the list (a question raised right after the snapshot is
    #: not closed as gone; one resolved right after it is not shown again).
    since_list: dict[str, str] | None = None

    def list_started(self) -> None:
        self.since_list = {}

    def requested(self, record: QuestionRecord) -> tuple[Effect, ...]:
        if self.since_list is not None:
            self.since_list[record.id] = "requested"
        where = place(record)
        if where is None or record.status != "pending":
            return ()
        self.pending[record.id] = Asked(record, *where)
        return (Show(where[0], where[1], record),)

    def resolved(self, question_id: str, status: str) -> tuple[Effect, ...]:
        if self.since_list is not None:
            self.since_list[question_id] = "resolved"
        asked = self.pending.pop(question_id, None)
        if asked is None:
            return ()
        return (Close(asked.chat_id, asked.user_id, question_id, status),)

    def listed(self, records: Iterable[QuestionRecord]) -> tuple[Effect, ...]:
        """The Gateway's pending questions at a hello: each is shown (again: the page keeps one dialog a question),
        and a question held here that the list lacks is closed (``GONE``)."""
        since, self.since_list = self.since_list or {}, None
        effects: list[Effect] = []
        seen: set[str] = set()
        for record in records:
            seen.add(record.id)
            if since.get(record.id) != "resolved":
                effects.extend(self.requested(record))
        for qid in [q for q in self.pending if q not in seen and since.get(q) != "requested"]:
            effects.extend(self.resolved(qid, GONE))
        return tuple(effects)

    def on_chat(self, chat_id: str, user_id: str | None = None) -> tuple[QuestionRecord, ...]:
        """The questions waiting in ``chat_id`` (for ``user_id`` only, when given), oldest first."""
        found = [
            a.record
            for a in self.pending.values()
            if a.chat_id == chat_id and (user_id is None or a.user_id == user_id)
        ]
        return tuple(sorted(found, key=lambda r: (r.created_at_ms or 0, r.id)))

    def may_answer(self, question_id: str, user_id: str) -> Asked | str:
        """The question ``user_id`` may answer, or the one line saying why not. The book's word is not the last:
        the Gateway refuses a question that ended meanwhile (``QUESTION_ALREADY_TERMINAL``)."""
        asked = self.pending.get(question_id)
        if asked is None:
            return "This question is no longer waiting for an answer."
        if asked.user_id != user_id:
            return "Only the chat's owner can answer this question."
        return asked


def check_answers(record: QuestionRecord, answers: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]] | str:
    """The answers to send for ``record`` (trimmed, blanks dropped), or the one line a person reads when they
    cannot be sent: the Gateway's own checks, made first so the dialog says what is missing in words (the
    Gateway's are codes such as ``QUESTION_INVALID_ANSWER``), and nothing is sent that it would refuse."""
    out: dict[str, tuple[str, ...]] = {}
    known = {q.question_id for q in record.questions}
    for qid in answers:
        if qid not in known:
            return "The answer names a question that was not asked."
    for q in record.questions:
        values = tuple(v.strip() for v in answers.get(q.question_id, ()) if isinstance(v, str) and v.strip())
        label = q.header or q.question
        if not values:
            return f"Please answer “{label}”."
        if len(values) > 1 and not q.multi_select:
            return f"“{label}” takes one answer."
        if not q.is_other and any(v not in {o.label for o in q.options} for v in values):
            return f"“{label}”: please pick one of the options."
        out[q.question_id] = values
    return out


def closing_line(status: str) -> str:
    """What a closed dialog's question is, said in the words of a person (the card says the same)."""
    return {
        "answered": "Answered.",
        CANCELLED: "Dismissed.",
        EXPIRED: "Expired: no answer arrived in time.",
        GONE: "No longer waiting for an answer.",
    }.get(status, "Closed.")
