"""What owc's status Action Function calls (``owc/owui/functions/openclaw_status.py``, issue 29).

Open WebUI 0.12.4 shows an Action as a button under each message of the models that list it in ``meta.actionIds``
(``utils/models.py``; ``owc owui install`` puts it there for owc's models) and calls its ``action`` on a click
(``utils/actions.py``, ``chat_action``) with the clicked message's ``id``, the ``chat_id``, the tab's ``session_id``
and the chat's messages up to that one. Its button's name is the Function's name, its icon the module's
``icon_url`` (read with ``getattr`` on the Action's instance, after the frontmatter's ``icon_url``).

The Action only opens the panel (``owc.owui.status_panel``) **in the tab that clicked**: ``__event_call__`` sends
its ``execute`` to that one Socket.IO session, where ``__event_emitter__`` would send it to every tab of the person
(and open the panel in all of them). The panel then reads owc's status routes itself (``owc.owui.status``) with the
page's session token, live, until it is closed: the Action holds no connection and waits on nothing but the page's
"shown". A message of the old Pipe's that carries its hidden sub-agent marker (inventory E2, "↳ Sub-agent
finished: <title>" with ``<!-- openclaw:taskId=<id> -->``) opens that sub-agent's drawer instead (read-only).

It returns nothing: Open WebUI would merge a returned ``messages`` into the chat and save it, and a click on a
status button must never change a message.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from owc.owui import status_panel

log = logging.getLogger("owc.owui")

#: The Action Function's id in Open WebUI, and its button's name (the Function's name).
ACTION_ID = "openclaw_status"
NAME = "OpenClaw status"
#: The old Pipe's hidden marker on its "Sub-agent finished" messages (inventory E2); the id as the routes take it.
TASK_MARKER = re.compile(r"<!--\s*openclaw:taskId=([A-Za-z0-9_.:-]{1,200})\s*-->")
_CHAT = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")

_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="currentColor"'
    ' stroke-width="1.5" stroke-linecap="round" stroke-linejoin="round">'
    '<path d="M3.5 16.5a8.5 8.5 0 1 1 17 0"/><path d="M12 16.5l4.2-5.2"/><circle cx="12" cy="16.5" r="1.2"/>'
    '<path d="M6.5 16.5h1.5M16 16.5h1.5M12 8.5V10"/></svg>'
)
#: The button's icon (a gauge), as a data URL: Open WebUI shows it as an image (inverted in dark mode).
ICON = "data:image/svg+xml;base64," + base64.b64encode(_SVG.encode()).decode()

EventCall = Callable[[dict[str, Any]], Awaitable[Any]]


class Valves(BaseModel):
    """The Action's admin settings."""

    priority: int = Field(default=0, description="Where this button sits among the message's Actions (lower: first).")


def clicked_task(body: Mapping[str, Any]) -> str | None:
    """The sub-agent task id in the clicked message's hidden marker, if it carries one (the old Pipe's "Sub-agent
    finished" messages); else None. Only the clicked message is read: a marker higher up the chat is another
    message's."""
    message_id = body.get("id")
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping) or message.get("id") != message_id:
            continue
        content = message.get("content")
        found = TASK_MARKER.search(content) if isinstance(content, str) else None
        return found.group(1) if found else None
    return None


async def action(body: Any, user: Any, event_call: EventCall | None) -> None:
    """The Action's ``action``: the panel's ``execute`` to the clicking tab. Nothing is returned (see the module
    doc); a tab that cannot be reached is logged, not raised (Open WebUI would show a raw error toast)."""
    if not isinstance(body, Mapping) or event_call is None:
        return None
    chat_id = body.get("chat_id")
    if not isinstance(chat_id, str) or not _CHAT.match(chat_id):
        log.info("owui.status_action_skipped reason=no_chat")
        return None
    task_id = clicked_task(body)
    code = status_panel.open_code(chat_id, task_id)
    try:
        shown = await event_call({"type": "execute", "data": {"code": code}})
    except Exception as exc:  # Open WebUI's call: a timeout or a tab gone; nothing to undo
        log.warning("owui.status_action_unanswered error=%s", type(exc).__name__)
        return None
    log.info("owui.status_action drawer=%s shown=%s", task_id is not None, _shown(shown))
    return None


def _shown(answer: Any) -> str:
    return str(answer.get("shown")) if isinstance(answer, Mapping) else "unknown"
