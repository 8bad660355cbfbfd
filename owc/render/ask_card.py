"""The card an ``ask_user`` call leaves in its message: what was asked, and what was answered (or that it was
dismissed, expired or stopped). Pure.

The same function serves the live stream and the finalize from the transcript, so a card never changes between
the two (a message finished from its transcript keeps the cards the tabs were shown). The Gateway calls the tool
in two shapes (measured, ``docs/measured/ask-user-2026.9.6.md`` sections 1 and 6): directly (``ask_user``, when
``tools.toolSearch`` is off), or, by default, through Tool Search's ``tool_call`` with
``{"id": "ask_user", "args": {...}}``, whose result wraps the tool's own result in JSON. Both become one card
named ``Ask User`` holding the questions as the model wrote them and the outcome in words. The tool's own result
texts are the Gateway's (fixed strings, measured): nothing a person typed is parsed, only shown.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

NAME = "Ask User"
TOOL = "ask_user"
#: How Tool Search names the tool in ``tool_call`` arguments (the short id) and in its wrapped result.
SEARCH_IDS = frozenset({"ask_user", "openclaw:core:ask_user"})

#: The tool's result texts for an unanswered question (measured, exact prefixes).
CANCELLED_TEXT = "The question was cancelled; proceed with best judgment."
EXPIRED_TEXT = "No answer arrived; proceed with best judgment."

DISMISSED = "Dismissed: nobody answered, the agent went on without an answer."
EXPIRED = "Expired: no answer arrived in time, the agent went on without one."
STOPPED = "Stopped before an answer."


@attrs.frozen
class CardView:
    name: str
    args: Any
    result: str | None


def is_ask(name: str, args: Any) -> bool:
    if name == TOOL:
        return True
    return name == "tool_call" and isinstance(args, dict) and args.get("id") in SEARCH_IDS


def view(name: str, args: Any, result: str | None, *, is_error: bool = False) -> CardView:
    """How a tool call shows: an ``ask_user`` call as the Ask User card, every other call as it is."""
    if not is_ask(name, args):
        return CardView(name, args, result)
    asked = args.get("args") if name == "tool_call" and isinstance(args, dict) else args
    return CardView(NAME, asked, None if result is None else outcome(_inner(result), is_error=is_error))


def _inner(text: str) -> str:
    """The tool's own result text inside Tool Search's wrapper (``{"tool": ..., "result": {"content": [...]}}``),
    or ``text`` itself."""
    if not text.startswith("{"):
        return text
    try:
        wrapped = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    result = wrapped.get("result") if isinstance(wrapped, dict) else None
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if parts:
            return "".join(parts)
    return text


def outcome(text: str, *, is_error: bool = False) -> str:
    """The card's result line(s). Answered: ``Answered:`` and the tool's ``<header>: <values>`` lines (the JSON
    copy after the blank line is for the model, not for a person). Otherwise the outcome in words."""
    if text.startswith(CANCELLED_TEXT):
        return DISMISSED
    if text.startswith(EXPIRED_TEXT):
        return EXPIRED
    if is_error:
        return STOPPED if text.strip() == "Aborted" else text
    lines = text.split("\n\n{", 1)[0].strip()
    return f"Answered:\n{lines}" if lines else "Answered."
