"""The usage line after a finished reply: how full the session's context is, the provider's rate-limit windows, the
agent's goal. Pure: what the Gateway said (``sessions.describe``, ``usage.status``), read once at the finalize,
becomes a few status lines. Shapes and rules measured on 2026.9.6: ``docs/measured/usage-thinking-2026.9.6.md``.

* Context: ``totalTokens`` is the prompt of the run's last model call (the context in use), ``contextTokens`` the
  model's window; shown only when the row is this run's (``lastRunId``), ``done`` (a failed run's row keeps the
  previous run's counts) and ``totalTokensFresh``. A missing number is unknown, never 0.
* Rate limits: the session's provider's windows (``usedPercent`` 0-100, ``resetAt`` epoch ms), said as what is
  left; "resets in" is counted from the Gateway's own ``updatedAt``, not owc's clock. A provider's ``summary``
  (a balance) when it has no windows.
* Goal: the agent's active goal, its objective and tokens.

Nothing is shown rather than something stale or guessed: every part is None when its read failed or said nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

#: At most this many characters of a goal's objective (the Gateway's text, one line).
OBJECTIVE_MAX = 80


@attrs.frozen
class Context:
    used: int
    window: int | None


@attrs.frozen
class Window:
    label: str
    used_percent: float
    reset_at_ms: int | None = None


@attrs.frozen
class Goal:
    objective: str
    status: str
    tokens_used: int | None = None
    token_budget: int | None = None


@attrs.frozen
class Usage:
    context: Context | None = None
    windows: tuple[Window, ...] = ()
    summary: str | None = None
    goal: Goal | None = None
    #: The Gateway's time of the rate-limit read (``usage.status`` ``updatedAt``): what "resets in" counts from.
    now_ms: int | None = None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def from_describe(result: Any, run_id: str) -> tuple[Context | None, Goal | None, str | None]:
    """The context, the goal and the session's provider, from ``sessions.describe``; (None, None, None) unless the
    row is run ``run_id``'s and it ended ``done``."""
    session = result.get("session") if isinstance(result, Mapping) else None
    if not isinstance(session, Mapping) or session.get("lastRunId") != run_id or session.get("status") != "done":
        return None, None, None
    context = None
    used, window = _int(session.get("totalTokens")), _int(session.get("contextTokens"))
    if session.get("totalTokensFresh") is True and used:
        context = Context(used, window or None)
    goal = None
    raw = session.get("goal")
    if isinstance(raw, Mapping) and raw.get("status") == "active" and isinstance(raw.get("objective"), str):
        objective = " ".join(raw["objective"].split())
        if objective:
            goal = Goal(objective, "active", _int(raw.get("tokensUsed")), _int(raw.get("tokenBudget")))
    provider = session.get("modelProvider")
    return context, goal, provider if isinstance(provider, str) else None


def from_usage_status(result: Any, provider: str | None) -> tuple[tuple[Window, ...], str | None, int | None]:
    """The windows (or summary) of ``provider`` from ``usage.status``, and the Gateway's time of the read."""
    if not isinstance(result, Mapping) or provider is None:
        return (), None, None
    now = _int(result.get("updatedAt"))
    for entry in result.get("providers") or ():
        if not isinstance(entry, Mapping) or entry.get("provider") != provider or entry.get("error"):
            continue
        windows = []
        for w in entry.get("windows") or ():
            if not isinstance(w, Mapping) or not isinstance(w.get("label"), str):
                continue
            pct = w.get("usedPercent")
            if not isinstance(pct, (int, float)) or isinstance(pct, bool) or not 0 <= pct <= 100:
                continue
            windows.append(Window(w["label"], float(pct), _int(w.get("resetAt"))))
        summary = entry.get("summary")
        return tuple(windows), summary.strip() if isinstance(summary, str) and summary.strip() else None, now
    return (), None, now


def tokens(n: int) -> str:
    """``950``, ``12k``, ``115k``, ``1.0m``: as a person reads a context size."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n / 1_000_000:.1f}m"


def relative(ms: int) -> str:
    minutes = max(0, round(ms / 60_000))
    if minutes < 60:
        return f"{minutes}m"
    hours, rest = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {rest}m" if rest else f"{hours}h"
    return f"{round(hours / 24)}d"


def context_line(context: Context) -> str:
    if context.window:
        return f"Context {tokens(context.used)} / {tokens(context.window)} ({100 * context.used / context.window:.1f}%)"
    return f"Context {tokens(context.used)}"


def window_line(window: Window, now_ms: int | None) -> str:
    left = f"{window.label} {100 - window.used_percent:.0f}% left"
    if window.reset_at_ms is not None and now_ms is not None and window.reset_at_ms > now_ms:
        return f"{left}, resets in {relative(window.reset_at_ms - now_ms)}"
    return left


def goal_line(goal: Goal) -> str:
    objective = goal.objective if len(goal.objective) <= OBJECTIVE_MAX else goal.objective[: OBJECTIVE_MAX - 1] + "…"
    if goal.tokens_used is not None and goal.token_budget:
        return f"Goal: {objective} ({tokens(goal.tokens_used)} / {tokens(goal.token_budget)} tokens)"
    return f"Goal: {objective}"


def lines(usage: Usage) -> tuple[str, ...]:
    """The status lines for ``usage``: one per fact, then (with more than one) the facts in one line, last, which
    is the one a tab shows (a click unfolds the rest). Empty when the Gateway said nothing."""
    facts: list[str] = []
    short: list[str] = []
    if usage.context is not None:
        facts.append(context_line(usage.context))
        short.append(facts[-1].removeprefix("Context ") + " context")
    for window in usage.windows:
        facts.append(window_line(window, usage.now_ms))
        short.append(f"{window.label} {100 - window.used_percent:.0f}% left")
    if not usage.windows and usage.summary:
        facts.append(usage.summary)
        short.append(usage.summary)
    if usage.goal is not None:
        facts.append(goal_line(usage.goal))
        short.append("goal active")
    if len(facts) > 1:
        facts.append(" · ".join(short))
    return tuple(facts)


def usage_of(describe: Any, status: Any, run_id: str) -> Usage:
    """Both reads (None: failed) as one ``Usage``."""
    context, goal, provider = from_describe(describe, run_id) if describe is not None else (None, None, None)
    windows, summary, now = from_usage_status(status, provider) if status is not None else ((), None, None)
    return Usage(context, windows, summary, goal, now)


__all__: Sequence[str] = ("Usage", "lines", "usage_of")
