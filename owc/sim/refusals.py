"""The two ways a simulated RPC handler refuses a request, in a module of their own so that handlers kept outside
``owc.sim.rpc`` (agents, compaction, tasks) can raise them without importing the dispatcher that imports them."""

from __future__ import annotations

from typing import Any


class InvalidParams(Exception):
    """Params the Gateway's schema rejects: answered as ``INVALID_REQUEST`` with ``invalid <method> params: ...``."""


#: An error without ``details`` (``None`` would send ``"details": null``, which the question refusal does).
NO_DETAILS: Any = object()


class Refused(Exception):
    """A request the handler refuses with its own error (no ``invalid <method> params:`` prefix)."""

    def __init__(self, code: str, message: str, details: Any = NO_DETAILS) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details
