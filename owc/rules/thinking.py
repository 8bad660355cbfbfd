"""The thinking level a person asks for, and what the session's model allows (issue 28, inventory B14). Pure.

A person picks a level per chat (owc's Filter Function writes it in the request body's ``reasoning_effort``, as
Open WebUI's own "Reasoning Effort" parameter does); the Pipe sends it with ``chat.send {thinking}`` for that turn
only. The Gateway never refuses a bad level as an RPC error (measured on 2026.9.6,
``docs/measured/usage-thinking-2026.9.6.md`` section 3): a level the model does not support ends the run at once with
an injected ``final`` naming the levels it does support, a wasted turn that reads like an answer; an unknown word is
silently ignored. So owc checks the level against the session's own list (``sessions.describe``'s
``thinkingLevels``) first and clamps it **down** (never up: a person who asked for less thinking does not get
more), and when it could not know the list (a session that has never run) it learns the list from the rejection
and sends the turn again.

What is here: the Gateway's synonyms and ranks (``thinking.shared``, read in the dist), ``clamp``, the reading of a
describe row's ladder, the parsers of the two refusal texts (the injected ``final`` and ``sessions.patch``'s
error), and ``ThinkingMemory``, a process's small memory of what it learned per model and which notes each chat
has had. No clock: nothing here expires; a ladder read from a row wins over a learned one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

#: The Gateway's ladder, ascending (``THINKING_LEVELS_HELP``).
LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh", "adaptive", "max", "ultra")
#: Each level's rank (``thinking.shared``): ``adaptive`` ranks with ``medium``.
RANKS: Mapping[str, int] = {
    "off": 0,
    "minimal": 10,
    "low": 20,
    "medium": 30,
    "adaptive": 30,
    "high": 40,
    "xhigh": 60,
    "max": 70,
    "ultra": 80,
}
#: The levels in the order a picker shows them (by rank, ``adaptive`` after ``medium``).
PICKER: tuple[str, ...] = tuple(sorted(LEVELS, key=lambda level: (RANKS[level], LEVELS.index(level))))

#: The Gateway's synonyms (``normalizeThinkLevel``), after lower-casing; ``xhigh``'s forms are matched with
#: spaces, ``-`` and ``_`` taken out.
_SYNONYMS: Mapping[str, str] = {
    "off": "off",
    "none": "off",
    "on": "low",
    "enable": "low",
    "enabled": "low",
    "low": "low",
    "thinkhard": "low",
    "think-hard": "low",
    "think_hard": "low",
    "min": "minimal",
    "minimal": "minimal",
    "think": "minimal",
    "mid": "medium",
    "med": "medium",
    "medium": "medium",
    "thinkharder": "medium",
    "think-harder": "medium",
    "harder": "medium",
    "high": "high",
    "ultrathink": "high",
    "thinkhardest": "high",
    "highest": "high",
    "adaptive": "adaptive",
    "auto": "adaptive",
    "max": "max",
    "ultra": "ultra",
}
_XHIGH = frozenset({"xhigh", "extrahigh"})


def normalize(value: Any) -> str | None:
    """The Gateway's level for what a person or a parameter wrote, or None for a word it would ignore."""
    if not isinstance(value, str):
        return None
    word = value.strip().lower()
    if not word:
        return None
    if word in _SYNONYMS:
        return _SYNONYMS[word]
    if re.sub(r"[\s_-]", "", word) in _XHIGH:
        return "xhigh"
    return None


@attrs.frozen
class Ladder:
    """The levels a model supports, ascending as the Gateway lists them: ``ids`` to send, ``labels`` to show
    (a label may differ from its id: ``{id: "high", label: "on"}``)."""

    ids: tuple[str, ...]
    labels: Mapping[str, str] = attrs.field(factory=dict)
    default: str | None = None

    def label(self, level: str) -> str:
        return self.labels.get(level, level)


def ladder_of(row: Any) -> Ladder | None:
    """The ladder of a ``sessions.describe`` row: ``thinkingLevels`` ``[{id, label}]``, else ``thinkingOptions``
    (labels only, read as levels); None when the row has neither (or is no row: a session that never ran)."""
    if not isinstance(row, Mapping):
        return None
    ids: list[str] = []
    labels: dict[str, str] = {}
    levels = row.get("thinkingLevels")
    if isinstance(levels, list):
        for item in levels:
            if not isinstance(item, Mapping):
                continue
            level = normalize(item.get("id"))
            if level is None or level in ids:
                continue
            ids.append(level)
            label = item.get("label")
            labels[level] = label if isinstance(label, str) and label else level
    if not ids and isinstance(row.get("thinkingOptions"), list):
        ids = _levels_from_labels(row["thinkingOptions"])
    if not ids:
        return None
    default = normalize(row.get("thinkingDefault"))
    return Ladder(tuple(ids), labels, default if default in ids else None)


def model_of(row: Any) -> str | None:
    """The ``provider/model`` key a describe row names (the ladder belongs to it)."""
    if not isinstance(row, Mapping):
        return None
    provider, model = row.get("modelProvider"), row.get("model")
    if isinstance(provider, str) and provider and isinstance(model, str) and model:
        return f"{provider}/{model}"
    return None


def _levels_from_labels(labels: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for label in labels:
        level = normalize(label)
        if level is not None and level not in out:
            out.append(level)
    return out


# ---------------------------------------------------------------------------------------------- the clamp


@attrs.frozen
class Clamp:
    """What to send for an asked level: ``level`` (None: send no ``thinking``), and the one-line ``note`` that says
    why it is not what was asked (None: nothing to say)."""

    level: str | None
    note: str | None = None
    #: The asked level, normalized (None: a word the Gateway would ignore).
    asked: str | None = None


# The notes are status lines (shown as plain text under the reply, not markdown): one sentence each, in the old
# Filter's words ("This model does not support thinking level 'ultra', using 'high' instead.").


def note_lower(asked: str, used: str, model: str | None) -> str:
    who = model or "This model"
    return f"{who} does not support thinking level '{asked}', so '{used}' was used."


def note_dropped(asked: str, model: str | None, *, only: str = "off") -> str:
    who = model or "This model"
    return f"{who} only supports thinking level '{only}', so '{asked}' was not sent."


def note_unknown(word: str) -> str:
    shown = word.strip()[:40]
    return f"'{shown}' is not a thinking level, so none was sent (levels: {', '.join(PICKER)})."


def clamp(asked: Any, ladder: Ladder | None, model: str | None = None) -> Clamp:
    """The level to send for ``asked`` on a model with ``ladder`` (None: unknown, sent as asked).

    Down, never up: the highest supported level whose rank is at or below the asked one's; if none is, the
    lowest supported. A ladder of ``off`` alone drops the level (sending ``off`` is what no level does there).
    A word the Gateway would ignore is not sent, and said."""
    level = normalize(asked)
    if level is None:
        text = asked if isinstance(asked, str) else ""
        return Clamp(None, note_unknown(text) if text.strip() else None, None)
    if ladder is None or level in ladder.ids:
        return Clamp(level, None, level)
    supported = [lv for lv in ladder.ids if lv in RANKS]
    if not supported:
        return Clamp(None, None, level)
    if all(lv == "off" for lv in supported):
        return Clamp(None, note_dropped(level, model, only=ladder.label("off")), level)
    below = [lv for lv in supported if RANKS[lv] <= RANKS[level]]
    chosen = max(below, key=lambda lv: RANKS[lv]) if below else min(supported, key=lambda lv: RANKS[lv])
    if chosen == "off":
        # Only "off" is at or below (the person asked for "off"-ranked less than a model's lowest): no level.
        return Clamp(None, note_dropped(level, model, only=ladder.label("off")), level)
    return Clamp(chosen, note_lower(level, ladder.label(chosen), model), level)


# ---------------------------------------------------------------------------------------------- refusals

#: The injected ``final`` (``get-reply``): ``Thinking level "<level>" is not supported for <provider>/<model>. Use
#: one of: <labels joined ", ">.``
_INJECTED = re.compile(
    r'^Thinking level "(?P<level>[^"]*)" is not supported for (?P<model>\S+?)\.\s+Use one of: (?P<labels>.*?)\.?\s*$',
    re.DOTALL,
)
#: ``sessions.patch``'s error: ``thinkingLevel "<level>" is not supported for <provider>/<model> (use a|b|c)``.
_PATCH = re.compile(r'thinkingLevel "(?P<level>[^"]*)" is not supported for (?P<model>\S+) \(use (?P<labels>[^)]*)\)')


@attrs.frozen
class Rejection:
    """The Gateway refused a level: the level it named (normalized), the model, and the levels it offered."""

    level: str | None
    model: str
    ladder: Ladder


def is_injected(message: Any) -> bool:
    """A ``final`` message the Gateway wrote itself rather than a model (measured: ``provider: "openclaw"``,
    ``model: "gateway-injected"``)."""
    return isinstance(message, Mapping) and (
        message.get("provider") == "openclaw" and message.get("model") == "gateway-injected"
    )


def _rejection(match: re.Match[str] | None, separator: str) -> Rejection | None:
    if match is None:
        return None
    shown: dict[str, str] = {}
    for label in (part.strip() for part in match["labels"].split(separator)):
        level = normalize(label)
        if level is not None and level not in shown:
            shown[level] = label
    if not shown:
        return None
    return Rejection(normalize(match["level"]), match["model"], Ladder(tuple(shown), shown))


def parse_injected(text: Any) -> Rejection | None:
    """The injected rejection's text read back (None: not that text)."""
    return _rejection(_INJECTED.match(text.strip()), ",") if isinstance(text, str) else None


def parse_patch_refusal(message: Any) -> Rejection | None:
    """``sessions.patch``'s refusal of a level read back (None: another error)."""
    return _rejection(_PATCH.search(message), "|") if isinstance(message, str) else None


def rejection_in_final(message: Any, text: str) -> Rejection | None:
    """A run's ``final`` that is the Gateway's thinking-level rejection (injected, and its text), else None."""
    return parse_injected(text) if is_injected(message) else None


# ---------------------------------------------------------------------------------------------- memory


@attrs.define
class ThinkingMemory:
    """What one process learned: each model's ladder from a rejection (used while a session's own row cannot say:
    it has never run), and which chats were told which note (once per chat for a model and an asked level). In
    memory only: a restart forgets it, and a ladder read from a describe row always wins (the model's list may
    change with a Gateway update)."""

    ladders: dict[str, Ladder] = attrs.field(factory=dict)
    noted: set[tuple[str, str | None, str | None, str | None]] = attrs.field(factory=set)
    #: Bounds, so a long-lived process keeps only the newest notes (chats are many; models are few).
    max_noted: int = 10_000

    #: The model a new session of each agent turned out to run (named by a rejection on a session with no row): a
    #: new chat's turn that does not pin a model is checked against it.
    agent_models: dict[str, str] = attrs.field(factory=dict)

    def learn(self, rejection: Rejection, *, new_session_of: str | None = None) -> None:
        """Remember the ladder the rejection named for its model; ``new_session_of``: the agent whose session had
        no row (it ran the agent's default model)."""
        self.ladders[rejection.model] = rejection.ladder
        if new_session_of:
            self.agent_models[new_session_of] = rejection.model

    def ladder(self, model: str | None) -> Ladder | None:
        return self.ladders.get(model) if model else None

    def note_once(self, chat_id: str, model: str | None, clamped: Clamp) -> str | None:
        """``clamped``'s note, the first time this chat hears it for this model and asked level; else None."""
        if clamped.note is None:
            return None
        key = (chat_id, model, clamped.asked, clamped.level)
        if key in self.noted:
            return None
        if len(self.noted) >= self.max_noted:
            self.noted.clear()
        self.noted.add(key)
        return clamped.note
