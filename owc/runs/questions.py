"""The question desk: the Gateway's questions (``ask_user``) to the tabs of their chat, and the answers back. A
pump around the pure book (``owc.rules.questions``).

Fed by the connection (``question.requested`` / ``question.resolved`` events, ``question.list`` at every hello),
it shows and closes dialogs through an ``Asker`` (``owc.owui.questions`` in Open WebUI), in the order the Gateway
said things, from one task the runtime's nursery owns (``run``): a slow tab never holds up the connection's reader.
A tab that opens a chat later is shown what waits there (``opened``). ``answer`` passes a person's answer or
dismissal to the Gateway (``question.resolve``) from whichever process the answer reached: every owc connection
may resolve any question (measured), so no answer has to find the process that asked.

No clock: the Gateway expires its questions (``expiresAtMs`` is its), and says so with ``question.resolved``. owc
never answers a question itself, and never logs an answer (the Gateway's doc: answers may be sensitive).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from owc.emit.asker import Asker, NoAsker
from owc.gateway.errors import GatewayError, RequestError
from owc.protocol.errors import ProtocolError
from owc.protocol.questions import (
    ALREADY_TERMINAL,
    INVALID_ANSWER,
    NOT_FOUND,
    QuestionRequested,
    QuestionResolved,
    cancel_params,
    parse_list,
    resolve_params,
)
from owc.rules.questions import Asked, Effect, QuestionBook, Show, check_answers

log = logging.getLogger("owc.questions")

Request = Callable[..., Awaitable[Any]]


@attrs.frozen
class AnswerOutcome:
    """What became of a person's answer: ``ok``, and the line the dialog shows when it is not (``code``: the HTTP
    status the page gets: 400 a bad answer, 403 not theirs, 409 already ended, 503 the Gateway unreachable)."""

    ok: bool
    status: str
    line: str = ""
    code: int = 200


@attrs.frozen
class _Job:
    effect: Effect
    session: str | None = None


@attrs.define(eq=False)
class QuestionDesk:
    asker: Asker = attrs.field(factory=NoAsker)
    book: QuestionBook = attrs.field(factory=QuestionBook)
    #: The runtime's ``GatewayClient.request`` (the current connection), set at assembly.
    request: Request | None = None
    _send: trio.MemorySendChannel[_Job] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[_Job] = attrs.field(init=False)
    _refused_logged: bool = False

    def __attrs_post_init__(self) -> None:
        # Unbounded: each entry is one show or close the Gateway caused, few per run; the reader never waits.
        self._send, self._receive = trio.open_memory_channel[_Job](math.inf)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The pump: each show and close in the order they were queued. A tab that cannot be reached costs that
        tab one log line, never the next question."""
        task_status.started()
        async for job in self._receive:
            effect = job.effect
            try:
                if isinstance(effect, Show):
                    tabs = await self.asker.show(effect.chat_id, effect.user_id, effect.record, session=job.session)
                    log.info("questions.shown id=%s chat=%s tabs=%d", effect.record.id, effect.chat_id, tabs)
                else:
                    tabs = await self.asker.close(effect.chat_id, effect.user_id, effect.question_id, effect.status)
                    log.info(
                        "questions.closed id=%s chat=%s status=%s tabs=%d",
                        effect.question_id,
                        effect.chat_id,
                        effect.status,
                        tabs,
                    )
            except Exception as exc:
                log.warning("questions.tab_failed chat=%s: %s: %s", effect.chat_id, type(exc).__name__, exc)

    def _queue(self, effects: Sequence[Effect], session: str | None = None) -> None:
        for effect in effects:
            self._send.send_nowait(_Job(effect, session))

    # ------------------------------------------------------------------ from the connection

    def on_event(self, event: QuestionRequested | QuestionResolved) -> None:
        """Called by the connection's reader, in order; never blocks."""
        if isinstance(event, QuestionRequested):
            record = event.record
            effects = self.book.requested(record)
            log.info(
                "questions.asked id=%s run=%s questions=%d shown=%s",
                record.id,
                record.run_id,
                len(record.questions),
                "yes" if effects else "no (not an Open WebUI chat's session)",
            )
        else:
            effects = self.book.resolved(event.id, event.status)
            log.info("questions.resolved id=%s status=%s", event.id, event.status)
        self._queue(effects)

    async def on_hello(self, request: Request) -> None:
        """What waits at the Gateway now (events are not replayed): shown again (one dialog each in the page),
        and any the book held that the Gateway no longer lists (it restarted; it ended while owc was away) closed."""
        self.book.list_started()
        try:
            result = await request("question.list", {})
            records, bad = parse_list(result)
        except (GatewayError, ProtocolError) as exc:
            self.book.since_list = None
            if isinstance(exc, RequestError) and exc.code == "FORBIDDEN" and self._refused_logged:
                return
            self._refused_logged = self._refused_logged or (isinstance(exc, RequestError) and exc.code == "FORBIDDEN")
            log.warning("questions.list_failed %s (questions raised while owc was away are not shown)", exc)
            return
        for line in bad:
            log.warning("questions.record_skipped %s", line)
        self._queue(self.book.listed(records))
        log.info("questions.listed pending=%d here=%d", len(records), len(self.book.pending))

    # ------------------------------------------------------------------ from the tabs

    def opened(self, chat_id: str, user_id: str, session: str) -> int:
        """Tab ``session`` of ``user_id`` opened chat ``chat_id``: it is shown what waits there for that user."""
        records = self.book.on_chat(chat_id, user_id)
        self._queue([Show(chat_id, user_id, r) for r in records], session)
        return len(records)

    async def answer(
        self, user_id: str, question_id: str, answers: Mapping[str, Sequence[str]] | None
    ) -> AnswerOutcome:
        """A person's answer (``None``: they dismissed the question) to ``question_id``, passed to the Gateway.
        The dialogs close on the Gateway's ``question.resolved``, in every tab alike."""
        asked = self.book.may_answer(question_id, user_id)
        if not isinstance(asked, Asked):
            code = 403 if "owner" in asked else 409
            return AnswerOutcome(False, "refused", asked, code)
        if answers is None:
            params = cancel_params(question_id, f"openwebui:{user_id}")
        else:
            checked = check_answers(asked.record, answers)
            if isinstance(checked, str):
                return AnswerOutcome(False, "invalid", checked, 400)
            params = resolve_params(question_id, checked, f"openwebui:{user_id}")
        request = self.request
        if request is None:
            return AnswerOutcome(False, "unreachable", _UNREACHABLE, 503)
        try:
            result = await request("question.resolve", params)
        except RequestError as exc:
            return _refused(exc)
        except GatewayError as exc:
            log.warning("questions.answer_unsent id=%s: %s", question_id, exc)
            return AnswerOutcome(False, "unreachable", _UNREACHABLE, 503)
        said = result.get("status") if isinstance(result, dict) else None
        status = str(said or ("cancelled" if answers is None else "answered"))
        log.info("questions.answered id=%s chat=%s status=%s", question_id, asked.chat_id, status)
        # The Gateway's answer is final: the dialogs close now, and a tab opened before its ``question.resolved``
        # (which may come seconds later, measured) is not shown the question again.
        self._queue(self.book.resolved(question_id, status))
        return AnswerOutcome(True, status)


_UNREACHABLE = "The Gateway is not reachable right now: your answer was not sent. It still waits; try again shortly."


def _refused(exc: RequestError) -> AnswerOutcome:
    details = exc.error.details if isinstance(exc.error.details, dict) else {}
    reason = details.get("reason")
    if reason == ALREADY_TERMINAL:
        return AnswerOutcome(False, "ended", "This question was already answered, dismissed or expired.", 409)
    if reason == NOT_FOUND:
        return AnswerOutcome(False, "ended", "This question is no longer waiting for an answer.", 409)
    if reason == INVALID_ANSWER:
        return AnswerOutcome(False, "invalid", f"The Gateway did not take this answer: {exc.error.message}", 400)
    log.warning("questions.answer_refused %s", exc)
    return AnswerOutcome(False, "refused", f"The Gateway refused the answer: {exc.error.message}", 502)
