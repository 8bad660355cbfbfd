"""Errors of the protocol core.

One exception type for everything wrong with a frame, so the connection has one thing to catch, log and skip.
The message names the problem and never echoes frame contents (a frame may carry a token).
"""

from __future__ import annotations

from typing import Any

import attrs


class ProtocolError(ValueError):
    """A frame that is not valid protocol 4: not JSON, not an object, a missing or mistyped required field,
    or larger than the Gateway's ``policy.maxPayload``."""


class FrameTooLarge(ProtocolError):
    """A frame larger than ``policy.maxPayload``, refused before parsing. ``size`` and ``limit`` in bytes."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds policy.maxPayload of {limit} bytes")
        self.size = size
        self.limit = limit


@attrs.frozen
class ErrorShape:
    """The Gateway's ``ErrorShape``: ``{code, message, details?, retryable?, retryAfterMs?}``.

    ``detail_code`` is ``details.code`` when present (``AUTH_TOKEN_MISMATCH``, ``PROTOCOL_MISMATCH``,
    ``MISSING_SCOPE`` ...): the top-level ``code`` is often just ``INVALID_REQUEST``.
    """

    code: str
    message: str
    details: Any = None
    retryable: bool = False
    retry_after_ms: int | None = None

    @property
    def detail_code(self) -> str | None:
        if isinstance(self.details, dict):
            code = self.details.get("code")
            if isinstance(code, str):
                return code
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            out["details"] = self.details
        if self.retryable:
            out["retryable"] = True
        if self.retry_after_ms is not None:
            out["retryAfterMs"] = self.retry_after_ms
        return out
