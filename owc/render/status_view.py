"""The status view of a chat's session (issue 29): what the status Action shows, as plain data. Pure.

Each part comes from its own read and is ``None`` when that read failed or said nothing (the page then says so for
that part alone, never a stale number): **context** from ``sessions.describe`` (provider, model, used / total tokens
while the Gateway marks them fresh), **limits** from ``usage.status`` (each window of the session's provider: used
percent and the reset time as epoch ms, which the page shows in the browser's own time zone), **goal** from the
describe row, **sub-agents** from ``tasks.list`` (``owc.render.subagents``). Every string is the Gateway's data,
bounded here; the page sets it with ``textContent``, never as markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Bounds on what the Gateway sends (a model name, a label, an objective): far above anything real.
MAX_TEXT = 300


def _text(value: Any, cap: int = MAX_TEXT) -> str | None:
    if not isinstance(value, str):
        return None
    clean = " ".join(value.split())
    if not clean:
        return None
    return clean if len(clean) <= cap else clean[: cap - 1] + "…"


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return int(value)


def session_row(describe: Any) -> Mapping[str, Any] | None:
    session = describe.get("session") if isinstance(describe, Mapping) else None
    return session if isinstance(session, Mapping) else None


def context_part(describe: Any) -> dict[str, Any] | None:
    """Provider, model and the context used, from the session's row; None without a row. ``used`` is None unless the
    Gateway marks the count fresh (``totalTokensFresh``: after a compaction it is not, until the next run)."""
    row = session_row(describe)
    if row is None:
        return None
    used = _count(row.get("totalTokens")) if row.get("totalTokensFresh") is True else None
    window = _count(row.get("contextTokens")) or None
    percent = round(100 * used / window, 1) if used is not None and window else None
    return {
        "provider": _text(row.get("modelProvider")),
        "model": _text(row.get("model")),
        "used": used,
        "window": window,
        "percent": percent,
        "running": row.get("status") == "running",
        "compactions": _count(row.get("compactionCount")),
    }


def goal_part(describe: Any) -> dict[str, Any] | None:
    """The session's active goal (``/goal``), if any."""
    row = session_row(describe)
    raw = row.get("goal") if row is not None else None
    if not isinstance(raw, Mapping) or raw.get("status") != "active":
        return None
    objective = _text(raw.get("objective"))
    if objective is None:
        return None
    return {
        "objective": objective,
        "tokensUsed": _count(raw.get("tokensUsed")),
        "tokenBudget": _count(raw.get("tokenBudget")),
    }


def limits_part(status: Any, provider: str | None) -> dict[str, Any] | None:
    """The provider's rate-limit windows from ``usage.status``: None when the read failed; ``windows`` empty when the
    Gateway has none for this provider (offline, an API-key provider: measured)."""
    if not isinstance(status, Mapping):
        return None
    windows: list[dict[str, Any]] = []
    summary = None
    for entry in status.get("providers") or ():
        if not isinstance(entry, Mapping) or entry.get("provider") != provider or entry.get("error"):
            continue
        for w in entry.get("windows") or ():
            if not isinstance(w, Mapping):
                continue
            label, used = _text(w.get("label"), 40), w.get("usedPercent")
            if label is None or isinstance(used, bool) or not isinstance(used, (int, float)) or not 0 <= used <= 100:
                continue
            windows.append(
                {"label": label, "usedPercent": round(float(used), 1), "resetAtMs": _count(w.get("resetAt"))}
            )
        summary = _text(entry.get("summary"))
        break
    return {"windows": windows, "summary": summary, "atMs": _count(status.get("updatedAt"))}


def view(describe: Any, status: Any, subagents: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The whole view; each read that failed is None (``describe``, ``status``) and its parts say so."""
    context = context_part(describe)
    return {
        "context": context,
        "goal": goal_part(describe),
        "limits": limits_part(status, context["provider"] if context else None),
        "subagents": subagents,
    }
