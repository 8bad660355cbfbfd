"""Typed reads from decoded JSON objects.

Each helper names the field's path in its ``ProtocolError`` so a log line says exactly what a frame lacked.
Unknown extra keys are never an error: the Gateway adds fields between releases (~80 row fields ride on every
``sessions.changed``), and owc keeps the raw object next to the typed view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from owc.protocol.errors import ProtocolError

JSONObject = Mapping[str, Any]


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def obj(value: object, where: str) -> JSONObject:
    if type(value) is dict:  # what orjson makes: skip the ABC check (issue 16's profile)
        return value
    if not isinstance(value, Mapping):
        raise ProtocolError(f"{where} must be an object, got {_type_name(value)}")
    return value


def opt_obj(d: JSONObject, key: str, where: str) -> JSONObject | None:
    value = d.get(key)
    if value is None:
        return None
    return obj(value, f"{where}.{key}")


def req_str(d: JSONObject, key: str, where: str) -> str:
    if key not in d:
        raise ProtocolError(f"{where} lacks required field {key!r}")
    value = d[key]
    if type(value) is not str and not isinstance(value, str):
        raise ProtocolError(f"{where}.{key} must be a string, got {_type_name(value)}")
    return value


def opt_str(d: JSONObject, key: str, where: str) -> str | None:
    value = d.get(key)
    if value is None or type(value) is str:
        return value
    if not isinstance(value, str):
        raise ProtocolError(f"{where}.{key} must be a string, got {_type_name(value)}")
    return value


#: The longest id (run id, session key) owc takes: real ones are UUIDs and ``agent:<id>:<channel>-...`` keys.
MAX_ID_CHARS = 512


def _id(value: str, where: str, key: str) -> str:
    """An id is logged and hashed into message ids: never empty (``runId: ""`` would open a run that names
    nothing, and every such event would land in it; an absent optional id is spelled by leaving it out or
    ``null``), no control characters (a newline would forge a log line), no absurd length (every log line would
    carry it)."""
    if not value:
        raise ProtocolError(f"{where}.{key} is empty (an id is never empty)")
    if len(value) > MAX_ID_CHARS:
        raise ProtocolError(f"{where}.{key} is {len(value)} characters long (at most {MAX_ID_CHARS})")
    if not value.isprintable() and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        # ``isprintable`` (C speed) is False for every control character; only then is it looked at char by char
        # (issue 16's profile: the per-character scan of every event's run id and session key was the reader's
        # largest single cost).
        raise ProtocolError(f"{where}.{key} holds a control character")
    return value


def req_id(d: JSONObject, key: str, where: str) -> str:
    return _id(req_str(d, key, where), where, key)


def opt_id(d: JSONObject, key: str, where: str) -> str | None:
    value = opt_str(d, key, where)
    return None if value is None else _id(value, where, key)


def opt_int(d: JSONObject, key: str, where: str) -> int | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"{where}.{key} must be a number, got {_type_name(value)}")
    return int(value)


def opt_bool(d: JSONObject, key: str, where: str) -> bool | None:
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ProtocolError(f"{where}.{key} must be a boolean, got {_type_name(value)}")
    return value


def opt_str_list(d: JSONObject, key: str, where: str) -> tuple[str, ...] | None:
    """A list of strings, or ``None`` when absent or ``null`` (``activeRunIds: null`` means "unknown")."""
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"{where}.{key} must be an array of strings")
    return tuple(value)


def opt_list(d: JSONObject, key: str, where: str) -> list[Any]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProtocolError(f"{where}.{key} must be an array, got {_type_name(value)}")
    return value
