"""What owc's thinking Filter Function calls (``owc/owui/functions/openclaw_thinking.py``, issue 28).

Open WebUI 0.12.4 runs a Filter's ``inlet`` on a chat request before the model's Pipe (``utils/filter.py``,
``process_filter_functions``): a Filter with ``toggle = True`` runs only when the person turned it on under the
composer (its id in the request's ``filter_ids``), and its ``UserValves`` (a person's own settings, shown in the
chat's Controls > Valves) arrive as ``__user__["valves"]``. A non-global Filter applies to the models that list it in
``meta.filterIds`` (``utils/models.py``); ``owc owui install`` puts it there for owc's models.

The Filter writes the chosen level into the request body's ``reasoning_effort``, the field Open WebUI's own Advanced
Params "Reasoning Effort" sets (moved to the body before the Filters run, ``apply_params_to_form_data``); the Pipe
reads it from there (``owc.owui.pipe.thinking_of``) and checks it against the chat's model. So the level is sent
per turn, never stored on the Gateway's session.

The choices are the whole ladder (``owc.rules.thinking.PICKER``), not one model's: a person's valve is one setting for
every chat and model, so any single model's list would be wrong for the others; the Pipe clamps a level the chat's
model lacks down to the nearest it has and says so once per chat (the old Filter built the list from a cache of the
ladders it had seen, which starts empty and goes stale when a model changes).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from owc.rules.thinking import PICKER

log = logging.getLogger("owc.owui")

#: The Filter Function's id in Open WebUI.
FILTER_ID = "openclaw_thinking"
#: The choice that sends no level: the model's own default.
DEFAULT = "default"
#: The toggle's icon under the composer (a light bulb, as a data URL: Open WebUI shows ``icon`` as an image).
ICON = (
    "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCIgZmls"
    "bD0ibm9uZSIgc3Ryb2tlPSJjdXJyZW50Q29sb3IiIHN0cm9rZS13aWR0aD0iMS41Ij48cGF0aCBkPSJNOSAxOGg2TTEwIDIxaDRNMTIgM2E2IDYg"
    "MCAwIDAtMy41IDEwLjljLjYuNSAxIDEuMiAxIDJWMTdoNXYtMS4xYzAtLjguNC0xLjUgMS0yQTYgNiAwIDAgMCAxMiAzeiIvPjwvc3ZnPg=="
)

Level = Literal["default", "off", "minimal", "low", "medium", "adaptive", "high", "xhigh", "max", "ultra"]
assert Level.__args__ == (DEFAULT, *PICKER), "the valve's choices are the Gateway's ladder"  # type: ignore[attr-defined]


class Valves(BaseModel):
    """The Filter's admin settings."""

    priority: int = Field(default=0, description="Where this Filter runs among the model's Filters (lower: first).")
    override_advanced_params: bool = Field(
        default=True,
        description="The level chosen here wins over the chat's Advanced Params 'Reasoning Effort'. Default: on",
    )


class UserValves(BaseModel):
    """A person's own setting (the chat's Controls > Valves)."""

    level: Level = Field(
        default="default",
        description="The thinking level OpenClaw's model uses while the toggle under the composer is on ('default':"
        " the model's own). A level the chat's model lacks is lowered to the nearest it has, said once.",
    )


def inlet(valves: Any, body: dict[str, Any], user: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Filter's ``inlet``: the chosen level into ``body["reasoning_effort"]``. Nothing when the level is
    ``default``; nothing over a level already in the body (Advanced Params) unless the valve says the Filter wins.
    Open WebUI calls it only while the toggle is on."""
    user_valves = user.get("valves") if isinstance(user, Mapping) else None
    level = getattr(user_valves, "level", DEFAULT)
    if not isinstance(body, dict) or not isinstance(level, str) or level == DEFAULT:
        return body
    override = bool(getattr(valves, "override_advanced_params", True))
    if body.get("reasoning_effort") and not override:
        log.info("owui.thinking_filter kept=advanced_params")
        return body
    body["reasoning_effort"] = level
    log.info("owui.thinking_filter level=%s", level)
    return body
