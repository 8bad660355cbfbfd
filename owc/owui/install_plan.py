"""What ``owc owui install`` must change so that a Function is as its ``FunctionSpec`` says: pure, from what Open
WebUI answered for it, so that a dry run and the run itself say the same lines and a second run finds nothing.

Why compare before writing: Open WebUI's ``update`` route stamps ``updated_at`` and stores a new history version
of the Function even when nothing differs, and a valve write reloads owc's settings (a reconnect when a
connection valve is among them). An install that changes nothing must write nothing (GitOps applies it on every
deploy).

The lines: one per change, a secret valve's value never in it (the line says it is a secret)::

    created openclaw (OpenClaw)
    updated openclaw (OpenClaw): code, description
    openclaw valve AGENT_ID set to 'ops'           (set: it had no saved value; changed: from one to another)
    openclaw valve GATEWAY_TOKEN changed (a secret: its value is not shown)
    activated openclaw_startup / deactivated ...
    made openclaw_thinking global / made openclaw_thinking not global
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from owc.owui.install_config import FunctionSpec

#: The import paths Open WebUI 0.12.4 rewrites in a Function's code before it stores it
#: (``utils/plugin.py``, ``replace_imports``): compared as it will be stored.
_STORED_IMPORTS = (
    ("from utils", "from open_webui.utils"),
    ("from apps", "from open_webui.apps"),
    ("from main", "from open_webui.main"),
    ("from config", "from open_webui.config"),
)


def as_stored(content: str) -> str:
    for old, new in _STORED_IMPORTS:
        content = content.replace(old, new)
    return content


class Step(enum.Enum):
    """A write, in the order they are made for one Function (valves before activation: enabling the Pipe starts
    owc with its saved valves, which are then already the configured ones)."""

    CREATE = "create"
    UPDATE = "update"
    VALVES = "valves"
    TOGGLE_ACTIVE = "toggle-active"
    TOGGLE_GLOBAL = "toggle-global"


@attrs.frozen
class Change:
    """One write. ``lines``: what is said of it (a valve write covers several valves: one line each);
    ``form``: the body to send (the Function's form, or the whole valves dict), never shown."""

    step: Step
    function_id: str
    lines: tuple[str, ...]
    form: Mapping[str, Any] | None = attrs.field(default=None, repr=False)


@attrs.frozen
class Found:
    """A Function as Open WebUI has it (``GET /api/v1/functions/id/{id}`` and its ``/valves``)."""

    name: str
    description: str | None
    content: str
    is_active: bool
    is_global: bool
    valves: Mapping[str, Any] | None = attrs.field(default=None, repr=False)

    @classmethod
    def from_answer(cls, answer: Mapping[str, Any], valves: Any) -> Found:
        meta = answer.get("meta") if isinstance(answer.get("meta"), Mapping) else {}
        return cls(
            name=str(answer.get("name") or ""),
            description=meta.get("description"),
            content=str(answer.get("content") or ""),
            is_active=bool(answer.get("is_active")),
            is_global=bool(answer.get("is_global")),
            valves=valves if isinstance(valves, Mapping) else None,
        )


def _shown(value: Any) -> str:
    """A non-secret valve's value as a line shows it: a URL without its credentials, short."""
    if isinstance(value, str) and "://" in value:
        from owc.gateway.url import redact_url

        value = redact_url(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def plan_function(spec: FunctionSpec, content: str, found: Found | None) -> list[Change]:
    """The writes that make the Function ``found`` (None: Open WebUI has none under the id) what ``spec`` says,
    with ``content`` its code. Empty when it already is."""
    fid, name = spec.function_id, spec.section.name
    form = {"id": fid, "name": name, "content": content, "meta": {"description": spec.section.description}}
    changes: list[Change] = []
    if found is None:
        changes.append(Change(Step.CREATE, fid, (f"created {fid} ({name})",), form))
        found = Found(name, spec.section.description, as_stored(content), is_active=False, is_global=False)
    else:
        differs = [
            what
            for what, same in (
                ("code", found.content == as_stored(content)),
                ("name", found.name == name),
                ("description", found.description == spec.section.description),
            )
            if not same
        ]
        if differs:
            changes.append(Change(Step.UPDATE, fid, (f"updated {fid} ({name}): {', '.join(differs)}",), form))
    valves = _plan_valves(spec, found.valves)
    if valves is not None:
        changes.append(valves)
    if spec.active is not None and spec.active != found.is_active:
        changes.append(Change(Step.TOGGLE_ACTIVE, fid, (f"{'activated' if spec.active else 'deactivated'} {fid}",)))
    if spec.is_global is not None and spec.is_global != found.is_global:
        word = "global" if spec.is_global else "not global"
        changes.append(Change(Step.TOGGLE_GLOBAL, fid, (f"made {fid} {word}",)))
    return changes


def _plan_valves(spec: FunctionSpec, saved: Mapping[str, Any] | None) -> Change | None:
    """One valves write (the saved ones with the configured ones over them), or None when each configured valve
    already holds its value."""
    saved = dict(saved or {})
    lines = []
    for name, value in spec.valves.items():
        if name in saved and saved[name] == value:
            continue
        verb = "changed" if name in saved else "set"
        if name in spec.secret_valves:
            lines.append(f"{spec.function_id} valve {name} {verb} (a secret: its value is not shown)")
        elif verb == "set":
            lines.append(f"{spec.function_id} valve {name} set to {_shown(value)}")
        else:
            lines.append(f"{spec.function_id} valve {name} changed from {_shown(saved[name])} to {_shown(value)}")
    if not lines:
        return None
    return Change(Step.VALVES, spec.function_id, tuple(lines), {**saved, **spec.valves})


def global_warning(spec: FunctionSpec, found: Found | None) -> str | None:
    """A Filter or Action an admin made global, which the configuration does not manage: said, and left."""
    if spec.section.may_be_global and spec.is_global is None and found is not None and found.is_global:
        return (
            f"warning: {spec.function_id} is global (it runs for every model, not only OpenClaw's): left so;"
            f" set {spec.section.table}.global = false to turn that off"
        )
    return None
