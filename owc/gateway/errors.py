"""Errors of the Gateway connection. None of them carries the token: messages are built from the
Gateway's error code and message, never from what owc sent."""

from __future__ import annotations

from trio_websocket import ConnectionRejected

from owc.protocol import ErrorShape, refusals
from owc.protocol.refusals import Refusal
from owc.protocol.websocket import clean_reason


class GatewayError(Exception):
    """Base of every error the connection raises. ``retryable`` says whether the same call may succeed later
    (the resume logic holds a retryable ``chat.send`` until the next hello-ok)."""

    retryable: bool = False


class Refused(GatewayError):
    """The Gateway refused the handshake. Retryable only when the Gateway said so (``UNAVAILABLE`` while it
    starts); a wrong token, a protocol mismatch or a missing device identity cannot succeed by retrying.
    ``refusal``: the line a person is told (``owc.protocol.refusals``), in the words of the place owc runs once
    the client has named it (``GatewayConfig.names``)."""

    def __init__(self, error: ErrorShape, close_code: int | None = None) -> None:
        detail = f" ({error.detail_code})" if error.detail_code else ""
        super().__init__(f"gateway refused the connection: {error.code}{detail}: {error.message}")
        self.error = error
        self.close_code = close_code
        self.retryable = error.retryable
        self.refusal: Refusal = refusals.explain(error, refusals.CLI)


class MissingScopes(GatewayError):
    """Connected, but without ``operator.read``: nothing owc does works (a client the Gateway did not trust with
    its scopes). The message says which are missing, what that disables and what to do; final, never retried."""

    def __init__(self, missing: tuple[str, ...], refusal: Refusal | None = None) -> None:
        self.refusal = refusal or refusals.explain_missing_scopes(missing, refusals.CLI)
        super().__init__(self.refusal.line)
        self.missing = missing


class RequestError(GatewayError):
    """An RPC the Gateway answered with ``ok: false``."""

    def __init__(self, method: str, error: ErrorShape) -> None:
        detail = f" ({error.detail_code})" if error.detail_code else ""
        super().__init__(f"{method} failed: {error.code}{detail}: {error.message}")
        self.method = method
        self.error = error
        self.code = error.code
        self.retryable = error.retryable
        self.retry_after_ms = error.retry_after_ms


class RequestTimeout(GatewayError):
    """No response within the RPC's response timeout: a hung server. The call may be repeated."""

    retryable = True

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"{method}: no response within {timeout:g} s")
        self.method = method


class SessionClosed(GatewayError):
    """The socket closed before the response came (the Gateway is restarting or the network dropped).
    Retryable: send it again after the next hello-ok."""

    retryable = True

    def __init__(self, method: str) -> None:
        super().__init__(f"{method}: the gateway connection closed before it answered")
        self.method = method


class NotConnected(GatewayError):
    """No connection right now (between a close and the next hello-ok). Retryable."""

    retryable = True

    def __init__(self, method: str) -> None:
        super().__init__(f"{method}: not connected to the gateway")
        self.method = method


class PayloadTooLarge(GatewayError):
    def __init__(self, method: str, size: int, limit: int) -> None:
        super().__init__(f"{method}: request of {size} bytes exceeds policy.maxPayload of {limit} bytes")


class ReplyTooLarge(GatewayError):
    """The Gateway's reply was larger than ``policy.maxPayload``: it was refused unparsed (the connection goes
    on). Asking again for less (a smaller ``limit`` or ``maxBytes``) may succeed."""

    def __init__(self, method: str, size: int, limit: int) -> None:
        super().__init__(f"{method}: reply of {size} bytes exceeds policy.maxPayload of {limit} bytes")
        self.method = method
        self.size = size
        self.limit = limit


def rejection_text(status_code: int, reason: bytes = b"") -> str:
    """One line for an HTTP answer where the WebSocket upgrade was asked for: the status and its cleaned reason,
    never the body (a web page, whatever the server chose to say). A 5xx or 429 is a server not ready (the
    Gateway starting, a proxy whose Gateway is down); anything else means the URL names something that is not
    the Gateway's WebSocket (its web page, another server, a wrong path)."""
    reason_text = clean_reason(reason)
    shown = f"HTTP {status_code}" + (f" {reason_text}" if reason_text else "")
    if status_code >= 500 or status_code == 429:
        return f"the Gateway URL answered {shown} (the Gateway, or a proxy in front of it, is not ready yet)"
    return f"the Gateway URL answered {shown} (not a WebSocket endpoint): check --gateway / OWC_GATEWAY_URL"


class NotAWebSocket(ConnectionRejected):
    """The Gateway URL answered the WebSocket upgrade with a plain HTTP status (not 101). A trio-websocket
    ``ConnectionRejected`` (status, headers, the start of the body) for what catches those; its text is one
    line (``rejection_text``), never the body or a tuple of it. A connect failure like another: ``owc run``
    and the Open WebUI host retry it (a proxy answers so while its Gateway restarts), ``owc doctor`` reports it."""

    def __init__(
        self, status_code: int, headers: tuple[tuple[bytes, bytes], ...], body: bytes, reason: bytes = b""
    ) -> None:
        super().__init__(status_code, headers, body)
        self.reason = reason

    def __str__(self) -> str:
        return rejection_text(self.status_code, self.reason)
