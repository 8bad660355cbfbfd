"""What the Function files call (``owc/owui/functions/``): kept here, in the installed package, so a Function file
stays a few lines that Open WebUI may re-execute on every save without touching owc's state.

* ``on_event``: the startup Event Function's ``event()``; at ``system.startup.completed`` the runtime starts with
  the Pipe's saved Valves (read from Open WebUI's ``function`` table), else the environment;
* ``pipe``: the Pipe's ``pipe()``; starts the runtime if the startup hook did not (the fallback), and answers a
  chat turn. User turns through the Gateway are the next issue's (13): until then the reply says so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from owc.owui.host import DEFAULT_AGENT_ID, SettingsError, ensure_started, settings_from

log = logging.getLogger("owc.owui")

#: The Pipe Function's id in Open WebUI (its models are ``openclaw.<agent id>``).
PIPE_ID = "openclaw"
#: The startup Event Function's id.
EVENT_ID = "openclaw_startup"

USER_TURNS_LATER = (
    "owc shows this chat's OpenClaw agent turns (cron wakes, sessions_send, sub-agent completions) as they run."
    " Sending your own messages to the agent arrives with the next owc release."
)


def pipes(valves: Any) -> list[dict[str, str]]:
    """The Pipe's models (a manifold of one): ``openclaw.<agent id>``, shown as "OpenClaw"."""
    agent = (getattr(valves, "AGENT_ID", "") or "").strip() or DEFAULT_AGENT_ID
    return [{"id": agent, "name": "OpenClaw"}]


async def _start(valves: Any, app: Any) -> bool:
    try:
        await ensure_started(settings_from(valves), app=app)
    except SettingsError as exc:
        log.error("owui.not_started %s", exc)
        return False
    return True


def _starts_owc(event: Any) -> bool:
    """Open WebUI has started, or one of owc's Functions is being enabled (``owc owui install`` on a running
    Open WebUI: agent turns then show at once, not from the next restart or the first message)."""
    if not isinstance(event, Mapping):
        event = {"event": getattr(event, "event", None), "subject": getattr(event, "subject", None)}
    name = event.get("event")
    if name == "system.startup.completed":
        return True
    subject = event.get("subject")
    subject_id = subject.get("id") if isinstance(subject, Mapping) else None
    return name in ("function.enable_started", "function.enabled") and subject_id in (PIPE_ID, EVENT_ID)


async def on_event(event: Any, app: Any) -> None:
    """The startup Event Function: start owc once Open WebUI has started (or owc's Functions are enabled), with
    the Pipe's saved Valves."""
    if not _starts_owc(event):
        return
    valves: Mapping[str, Any] = {}
    try:
        from open_webui.models.functions import Functions

        valves = await Functions.get_function_valves_by_id(PIPE_ID) or {}
    except Exception:
        log.exception("owui.valves_unreadable (starting from the environment)")
    await _start(valves, app)


async def pipe(valves: Any, body: Mapping[str, Any], *, request: Any = None, task: Any = None) -> str:
    """The Pipe's ``pipe()``. A background task of Open WebUI (title, tags, follow-ups: ``__task__`` set) must
    never start an agent run; it gets an empty answer."""
    started = await _start(valves, getattr(request, "app", None))
    if task:
        return ""
    if not started:
        return "owc is not running: its Gateway settings are incomplete (see Open WebUI's log)."
    return USER_TURNS_LATER
