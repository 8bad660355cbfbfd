"""The Gateway's questions in Open WebUI's tabs: the ``Asker`` that opens and closes their dialogs, the route their
answers come back by, and the tab that opens a chat while a question waits there (issue 27).

Every worker (and instance) runs its own owc with its own Gateway connection, and every such connection gets
every question event (measured: a connection with ``operator.admin`` does). So each process shows a question to
**its own** tabs on the chat (the chat room's sessions this process holds), closes it in them on
``question.resolved``, and shows what waits to a tab of its own that opens the chat. An answer is a ``fetch`` to
``ROUTE`` on whichever worker the load balancer picks; that worker's owc resolves it with its own connection
(any connection may: measured, connection B answered A's question). Nothing assumes one process, and nothing relies
on ``sio.call`` answers finding the worker that called (Open WebUI #15162).

A dialog goes only to sessions of the chat's owner (the session key's user): a question is never shown to anyone
else, and only the owner's answer is taken (``owc.rules.questions``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from owc.owui import trio_host
from owc.owui.question_dialog import ANSWER_PATH, close_code, open_code
from owc.protocol.questions import QuestionRecord
from owc.rules.questions import closing_line
from owc.runs.questions import QuestionDesk

log = logging.getLogger("owc.owui")

ROUTE = ANSWER_PATH + "{question_id}"
#: Bounds of an answer's body: 1-3 questions, each a few values; anything larger is not a person's answer.
MAX_BODY = 64 * 1024
MAX_VALUES = 16
MAX_VALUE = 4000


class OwuiAsker:
    """The Trio side's ``Asker`` inside Open WebUI: each call crosses to the loop's asyncio side (the host)."""

    def __init__(self, host: trio_host.TrioHost) -> None:
        self._host = host

    async def show(self, chat_id: str, user_id: str, record: QuestionRecord, *, session: str | None = None) -> int:
        return await self._host.run_in_asyncio(_send, chat_id, user_id, open_code(record, chat_id), session)

    async def close(self, chat_id: str, user_id: str, question_id: str, status: str) -> int:
        return await self._host.run_in_asyncio(
            _send, chat_id, user_id, close_code(question_id, closing_line(status)), None
        )


async def _send(chat_id: str, user_id: str, code: str, session: str | None) -> int:
    """``code`` as an ``execute`` event to this process's sessions of ``user_id`` in chat ``chat_id``'s room (or
    to ``session`` only), about the chat's current message (the page runs an ``execute`` only for a message it
    holds). Returns how many sessions it went to."""
    from open_webui.models.chats import Chats
    from open_webui.socket.main import get_socket_session_user, sio

    if session is not None:
        sessions: list[str] = [session]
    else:
        sessions = [sid for sid, _ in sio.manager.get_participants("/", f"chat:{chat_id}")]
    if not sessions:
        return 0
    chat = await Chats.get_chat_by_id(chat_id)
    history = ((getattr(chat, "chat", None) or {}).get("history") or {}) if chat else {}
    message_id = held_message(history)
    if message_id is None:
        return 0
    sent = 0
    for sid in sessions:
        user = await get_socket_session_user(sid, wait_for_disconnect=False)
        if not user or user.get("id") != user_id:
            continue  # another user's tab on this chat (a shared chat): never shown
        event = {"chat_id": chat_id, "message_id": message_id, "data": {"type": "execute", "data": {"code": code}}}
        await sio.emit("events", event, to=sid)
        sent += 1
    return sent


def held_message(history: dict[str, Any]) -> str | None:
    """The message an ``execute`` about the chat is addressed to: one every tab on the chat holds. A page runs an
    ``execute`` only about a message its history holds (measured, NOTES "Stop vs Send now"), and the chat's current
    message is often one the tab has not been told of yet: owc's own reply, claimed in the database just before the
    question came, whose ``chat:messages`` is still on its way (the dialog was lost so in CI, at load). The user turn
    under it was sent by the tab itself or loaded with the chat, so an assistant message's parent is taken when the
    history has it; the current message otherwise. None when the history names no current message."""
    current = history.get("currentId")
    if not isinstance(current, str):
        return None
    messages = history.get("messages")
    message = messages.get(current) if isinstance(messages, dict) else None
    if isinstance(message, dict) and message.get("role") == "assistant":
        parent = message.get("parentId")
        if isinstance(parent, str) and isinstance(messages.get(parent), dict):  # type: ignore[union-attr]
            return parent
    return current


# ---------------------------------------------------------------------------------------------- a tab opens a chat


def tab_opened(sid: str, chat_id: str, owner: set[trio_host.OwnedTask]) -> None:
    """Session ``sid`` opened chat ``chat_id`` (its ``last_read_at``, ``owc.owui.page``): it is shown what waits
    there. Started as a task of the host's group held by ``owner``; one log line if it fails."""
    host = trio_host.process_host()
    if host is None:
        return
    host.start_asyncio(_tab_opened, sid, chat_id, owner=owner)


async def _tab_opened(sid: str, chat_id: str) -> None:
    from open_webui.socket.main import get_socket_session_user

    try:
        user = await get_socket_session_user(sid, wait_for_disconnect=False)
        user_id = user.get("id") if isinstance(user, dict) else None
        if not isinstance(user_id, str):
            return
        host, desk = _desk()

        async def opened() -> int:
            return desk.opened(chat_id, user_id, sid)

        shown = await host.run_in_trio(opened)
        if shown:
            log.info("owui.questions_on_open chat=%s shown=%d pid=%d", chat_id, shown, os.getpid())
    except Exception as exc:
        log.warning("owui.questions_on_open_failed chat=%s: %s: %s", chat_id, type(exc).__name__, exc)


# ---------------------------------------------------------------------------------------------- the answer route


def _desk() -> tuple[trio_host.TrioHost, QuestionDesk]:
    """The running host and its runtime's question desk; ``HostError`` if owc is not running here."""
    host = trio_host.current_host()
    keeper = getattr(getattr(host, "started_value", None), "keeper", None)
    desk = getattr(keeper, "questions", None)
    if host is None or not isinstance(desk, QuestionDesk):
        raise trio_host.HostError("owc is not running")
    return host, desk


def answer_route(verified: Callable[[dict[bytes, bytes]], Awaitable[str | None]]) -> Any:
    """The route the dialog posts to: ``{"answers": {<question id>: [values]}}`` or ``{"cancel": true}``, with the
    page's session token (``verified``: the user it names, as Open WebUI's own API checks it, or None). Answers
    ``{"status"}`` (200) or ``{"detail": <one line>}`` (400 a bad body or answer, 401 no valid session, 403 not
    the chat's owner, 409 the question ended, 503 owc or the Gateway not reachable)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def answer(request: Request) -> JSONResponse:
        headers = {k.lower(): v for k, v in request.scope.get("headers", ())}
        if not headers.get(b"authorization") and b"token=" not in headers.get(b"cookie", b""):
            return JSONResponse({"detail": SIGN_IN}, status_code=401)
        body = await _bounded_body(request)
        parsed = parse_body(body) if body is not None else "The answer is too large."
        if isinstance(parsed, str):
            return JSONResponse({"detail": parsed}, status_code=400)
        user_id = await verified(headers)
        if user_id is None:
            return JSONResponse({"detail": SIGN_IN}, status_code=401)
        question_id = request.path_params.get("question_id", "")
        try:
            host, desk = _desk()
            outcome = await host.run_in_trio(desk.answer, user_id, question_id, parsed)
        except trio_host.HostError:
            return JSONResponse({"detail": "owc is not running here: your answer was not sent."}, status_code=503)
        # One line a person's answer (never its words): which process took it, and what became of it.
        log.info(
            "owui.question_answer id=%s status=%s code=%d pid=%d",
            _printable(question_id),
            outcome.status,
            outcome.code,
            os.getpid(),
        )
        if outcome.ok:
            return JSONResponse({"status": outcome.status})
        return JSONResponse({"detail": outcome.line, "status": outcome.status}, status_code=outcome.code)

    return Route(ROUTE, answer, methods=["POST"], name="owc-question-answer")


SIGN_IN = "Sign in to Open WebUI to answer."


async def _bounded_body(request: Any) -> bytes | None:
    """The request's body, or None past ``MAX_BODY`` (read no further: a larger body is not a person's answer)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _printable(text: str) -> str:
    """An id from a URL as a log shows it: at most 80 characters, nothing but letters, digits and ``_-.``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "?", text[:80])


def parse_body(body: bytes) -> dict[str, list[str]] | str | None:
    """The answers a request carries (``None``: a dismissal), or the one line saying what is wrong with it."""
    try:
        data = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError:
        return "The answer is not JSON."
    if not isinstance(data, dict):
        return "The answer must be a JSON object."
    if data.get("cancel") is True and "answers" not in data:
        return None
    answers = data.get("answers")
    if not isinstance(answers, dict) or not answers:
        return 'Send {"answers": {<question id>: [values]}} or {"cancel": true}.'
    out: dict[str, list[str]] = {}
    for qid, values in answers.items():
        if not isinstance(values, list) or not 0 < len(values) <= MAX_VALUES:
            return "Each question takes a list of 1-16 answers."
        if not all(isinstance(v, str) and len(v) <= MAX_VALUE for v in values):
            return f"Each answer is text of at most {MAX_VALUE} characters."
        out[str(qid)] = list(values)
    return out
