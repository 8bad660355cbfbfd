"""The RPCs owc calls, answered as the real Gateway 2026.9.6 answers them.

Dispatch checks the method's scope first (``FORBIDDEN`` / ``MISSING_SCOPE``), then the params
(``INVALID_REQUEST``). Replies and events share a connection's outbound channel, so a handler decides the
order: ``chat.send`` replies before its run's first event (the start is deferred until the reply is queued),
while ``chat.abort``'s aborted terminal reaches clients before its reply, as measured live.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from owc.protocol import ProtocolError, Request, decode_frame
from owc.sim import model as m
from owc.sim.delivery import READ, WRITE, Fanout, SimConn
from owc.sim.runs import RunDriver
from owc.sim.script import End, Responder

log = logging.getLogger("owc.sim")

METHOD_SCOPES = {
    "sessions.subscribe": READ,
    "sessions.list": READ,
    "sessions.describe": READ,
    "sessions.messages.subscribe": READ,
    "sessions.messages.unsubscribe": READ,
    "chat.history": READ,
    "chat.send": WRITE,
    "chat.abort": WRITE,
}

Handler = Callable[[SimConn, dict[str, Any]], dict[str, Any]]
T = TypeVar("T")
D = TypeVar("D")


class InvalidParams(Exception):
    pass


def param(params: dict[str, Any], key: str, kind: type[T], default: D) -> T | D:
    """``params[key]`` if it is a ``kind``, else ``default``: a wrong type counts as absent, as in the Gateway."""
    value = params.get(key)
    return value if isinstance(value, kind) else default


def require_str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"must have required property '{key}'")
    return value


class Rpc:
    """Reads a connection's requests and queues their replies; counts requests by method in ``requests``."""

    def __init__(
        self,
        fanout: Fanout,
        driver: RunDriver,
        requests: collections.Counter[str],
        *,
        responder: Responder,
        max_payload: int,
        now_ms: Callable[[], int],
        poke: Callable[[], None],
    ) -> None:
        self._fanout = fanout
        self._driver = driver
        self.requests = requests
        self.responder = responder
        self._max_payload = max_payload
        self._now_ms = now_ms
        self._poke = poke
        self._deferred: list[Callable[[], object]] = []
        #: Set by the simulator: holds a stalled request until it is released (``Faults.stall_requests``).
        self.hold: Callable[[SimConn, Request], None] = self.answer
        self._handlers: dict[str, Handler] = {
            "sessions.subscribe": self._sessions_subscribe,
            "sessions.list": self._sessions_list,
            "sessions.describe": self._sessions_describe,
            "sessions.messages.subscribe": self._sessions_messages_subscribe,
            "sessions.messages.unsubscribe": self._sessions_messages_unsubscribe,
            "chat.history": self._chat_history,
            "chat.send": self._chat_send,
            "chat.abort": self._chat_abort,
        }

    def on_request(self, conn: SimConn, message: str | bytes) -> None:
        try:
            frame = decode_frame(message, max_payload=self._max_payload)
        except ProtocolError as exc:
            log.warning("sim.bad_frame conn=%s error=%s", conn.name, exc)
            return
        if not isinstance(frame, Request):
            return
        self.requests[frame.method] += 1
        self._poke()
        if conn.stalled:
            return
        if frame.method in conn.stalling:
            self.hold(conn, frame)
            return
        self.answer(conn, frame)

    def answer(self, conn: SimConn, frame: Request) -> None:
        """Answer a request (also one a stall held, when it is released: as if it had just arrived)."""
        if conn.closing:
            return
        if frame.method in conn.failing:
            self._reply_error(conn, frame.id, "UNAVAILABLE", f"{frame.method} failed: the agent's store did not answer")
            return
        scope = METHOD_SCOPES.get(frame.method)
        if scope is None:
            self._reply_error(conn, frame.id, "INVALID_REQUEST", f"unknown method: {frame.method[:80]}")
            return
        if scope not in conn.scopes:
            details = {"code": "MISSING_SCOPE", "missingScope": scope, "requiredScopes": [scope]}
            self._reply_error(conn, frame.id, "FORBIDDEN", f"missing scope: {scope}", details)
            return
        params = frame.params if isinstance(frame.params, dict) else {}
        try:
            payload = self._handlers[frame.method](conn, params)
        except InvalidParams as exc:
            self._reply_error(conn, frame.id, "INVALID_REQUEST", f"invalid {frame.method} params: {exc}")
            return
        if not conn.closing:
            self._fanout.enqueue(conn, {"type": "res", "id": frame.id, "ok": True, "payload": payload})
        self._after_reply()

    def _reply_error(self, conn: SimConn, req_id: str, code: str, message: str, details: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if details is not None:
            error["details"] = details
        if not conn.closing:
            self._fanout.enqueue(conn, {"type": "res", "id": req_id, "ok": False, "error": error})

    def _after_reply(self) -> None:
        """Run what a handler deferred until its reply was queued (a ``chat.send`` run's start)."""
        deferred, self._deferred = self._deferred, []
        for fn in deferred:
            fn()

    def _list(self, params: dict[str, Any]) -> dict[str, Any]:
        limit = param(params, "limit", int, 50)
        rows = sorted(self._driver.sessions.values(), key=lambda s: s.updated_at, reverse=True)
        if params.get("activeOnly"):
            rows = [s for s in rows if s.active is not None]
        shown = rows[: max(0, limit)]
        return {
            "ts": self._now_ms(),
            "path": "(owc-sim)",
            "count": len(shown),
            "totalCount": len(rows),
            "limitApplied": limit,
            "nextOffset": len(shown) if len(rows) > len(shown) else None,
            "hasMore": len(rows) > len(shown),
            "owners": [],
            "defaults": {"modelProvider": m.PROVIDER, "model": m.MODEL},
            "sessions": [s.row() for s in shown],
        }

    def _sessions_subscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        conn.subscribed = True  # registered before the list is built, as the real handler does
        self._poke()
        if not params:
            return {"subscribed": True}
        return {"subscribed": True, "list": self._list(params)}

    def _sessions_list(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        return self._list(params)

    def _sessions_describe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "key")
        session = self._driver.sessions.get(key)
        return {"session": None if session is None else session.row()}

    def _sessions_messages_subscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "key")
        conn.message_keys.add(key)
        return {"subscribed": True, "key": key}

    def _sessions_messages_unsubscribe(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "key")
        conn.message_keys.discard(key)
        return {"subscribed": False, "key": key}

    def _chat_send(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "sessionKey")
        message = require_str(params, "message")
        run_id = require_str(params, "idempotencyKey")
        existing = self._driver.runs.get(run_id)
        if existing is not None:
            return {
                "runId": run_id,
                "status": "in_flight" if existing.state == "active" or run_id in self._driver.pending else "ok",
            }
        steps = list(self.responder(key, message))
        # Measured: the real Gateway stores ``systemInputProvenance`` as the user message's ``provenance``.
        provenance = param(params, "systemInputProvenance", dict, None)
        # The reply goes out before the run's first event, as on the real Gateway.
        self._deferred.append(
            lambda: self._driver.start_run(
                key,
                run_id,
                origin="chat.send",
                user_text=message,
                steps=steps,
                owner=conn.conn_id,
                provenance=provenance,
            )
        )
        return {"runId": run_id, "status": "started"}

    def _chat_abort(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "sessionKey")
        run_id = param(params, "runId", str, None)
        session = self._driver.sessions.get(key)
        aborted: list[str] = []
        if session is not None:
            aborted += self._driver.cancel_queued(session, run_id)
            active = session.active
            if active is not None and (run_id is None or active.run_id == run_id):
                aborted.append(active.run_id)
                # Live: the aborted terminal reaches clients before the chat.abort reply.
                self._driver.end(active, End("aborted", stop_reason="rpc"))
        return {"ok": True, "aborted": bool(aborted), "runIds": aborted}

    def _chat_history(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        key = require_str(params, "sessionKey")
        session = self._driver.sessions.get(key)
        messages = session.transcript if session is not None else []
        limit = param(params, "limit", int, 200)
        offset = max(param(params, "offset", int, 0), 0)
        # Measured on 2026.9.6: ``offset`` counts back from the newest message; a page is in transcript
        # order; ``nextOffset`` is the offset of the next older page while ``hasMore``.
        end = max(len(messages) - offset, 0)
        shown = messages[max(end - limit, 0) : end] if limit > 0 else []
        has_more = end - len(shown) > 0
        return {
            "sessionKey": key,
            "sessionId": session.session_id if session is not None else None,
            "messages": shown,
            "pendingInputs": [],
            "offset": offset or None,
            "nextOffset": offset + len(shown) if has_more else None,
            "hasMore": has_more,
            "totalMessages": len(messages),
            "defaults": {"modelProvider": m.PROVIDER, "model": m.MODEL},
            "sessionInfo": {},
        }
