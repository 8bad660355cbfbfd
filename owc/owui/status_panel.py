"""The status panel in Open WebUI's page (issue 29): the code of the ``execute`` the status Action sends to the
clicking tab. Pure (strings only); ``owc.owui.status_action`` sends it.

Why the page fills itself instead of the Action sending the data: the view is live (the Gateway's events change it
while it is open) and a person may keep it open for minutes, so the page reads owc's routes (``owc.owui.status``)
with its own session token: ``/live`` as NDJSON (one fetch, aborted when the panel closes), Compact as a POST, a
sub-agent's drawer from its own ``/live``. The Action's call ends as soon as the panel is shown; nothing of the
Action's waits on the view.

What is filled here is only owc's (the chat id Open WebUI gave the Action, a task id from a marker, the routes'
path): embedded as JSON with ``<``, ``>``, ``&`` and the JS line separators escaped, in **one pass**
(``question_dialog``'s escaping and filling, the same rule for every ``execute`` owc builds). Everything the
Gateway says (a model name, a task title, a tool's arguments) reaches the page later as fetched JSON and is set
with ``textContent``, never as markup.
"""

from __future__ import annotations

from importlib.resources import files

from owc.owui.question_dialog import _fill, _json
from owc.owui.status import PREFIX

#: The panel's element id (one per page) and its drawer's.
ELEMENT_ID = "owc-status"
DRAWER_ID = "owc-status-drawer"


def open_code(chat_id: str, task_id: str | None = None) -> str:
    """The ``execute`` code that opens the status panel of chat ``chat_id`` in this tab (or focuses the one open),
    or, with ``task_id``, that sub-agent's drawer (read-only). The page answers ``{shown}``: False when it only
    focused the panel already open."""
    data = {"chat": chat_id, "task": task_id}
    return _fill(_OPEN, {"DATA": _json(data), "BASE": _json(PREFIX), "PREFIX": _json(ELEMENT_ID)})


#: The panel's code (``status_panel.js``, shipped with the package), read once.
_OPEN = (files("owc.owui") / "status_panel.js").read_text(encoding="utf-8")
