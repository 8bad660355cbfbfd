"""What ``owc owui install`` is to make true, read from a TOML file (``--config FILE``) or from the environment,
validated strictly: an ``InstallSpec``.

Why a schema of owc's own rather than a dictionary passed on: the install runs unattended (an init container, a
deploy job), so a typo must stop it with one line naming the key, before anything is written, rather than be
ignored (a valve that silently stays as it was). Each valve's name, type and secrecy come from the Functions' own
``Valves`` classes, read from their source with ``ast`` (owc's command line has no pydantic, and a valve added to a
Function is then known here without a second list to keep in step).

Secrets come from files only: a secret valve (one Open WebUI masks, ``{"input": {"type": "password"}}``) is given
as ``{ file = "/path" }`` in TOML or ``OWC_VALVE_FILE_<NAME>=/path`` in the environment; its literal value in the
configuration is refused (a configuration file lives in a repository, an environment in a process listing). The
value read is held in ``repr=False`` fields and never said.

The schema (the README has the full example)::

    [openwebui]          url, admin_email, admin_password_file, wait, connect_wait
    [pipe]               id, active, [pipe.valves]
    [startup]            active
    [thinking]/[status]  active, global, [thinking.valves]/[status.valves]

The environment form (used when neither ``--config`` nor ``--url`` is given): ``OWC_OWUI_URL``,
``OWC_OWUI_ADMIN_EMAIL``, ``OWC_OWUI_ADMIN_PASSWORD_FILE`` (or ``OWC_OWUI_ADMIN_PASSWORD``), ``OWC_OWUI_WAIT``,
``OWC_OWUI_CONNECT_WAIT``; ``OWC_VALVE_<NAME>`` / ``OWC_VALVE_FILE_<NAME>`` for the Pipe's valves;
``OWC_FUNCTION_<PIPE|STARTUP|THINKING|STATUS>_<ACTIVE|GLOBAL>``, ``OWC_FUNCTION_<THINKING|STATUS>_VALVE_<NAME>``
and ``OWC_FUNCTION_PIPE_ID``. Every variable under ``OWC_VALVE_`` and ``OWC_FUNCTION_`` must be one of these.
"""

from __future__ import annotations

import ast
import math
import os
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from owc.owui.pipe import EVENT_ID, PIPE_ID
from owc.owui.status_action import ACTION_ID
from owc.owui.status_action import NAME as ACTION_NAME
from owc.owui.thinking_filter import FILTER_ID

#: The Open WebUI connection's defaults: one attempt (``wait``), and how long to wait for owc's hello.
DEFAULT_WAIT_S = 0.0
DEFAULT_CONNECT_WAIT_S = 20.0
MAX_WAIT_S = 3600.0


class ConfigUsageError(ValueError):
    """The configuration itself is wrong (an unknown key, a wrong type, a value missing): the usage exit code."""


class ConfigFileError(ValueError):
    """A file the configuration names (the admin's password, a secret valve's) cannot be read: the config code."""


@attrs.frozen
class Valve:
    """One valve of a Function, as its ``Valves`` class declares it."""

    name: str
    kind: str  # "str", "int", "float" or "bool"
    secret: bool


@attrs.frozen
class Section:
    """One of owc's Functions as the configuration names it: its TOML table, its environment word, its Function
    id, name, file, description, where its ``Valves`` class is written, and whether ``global`` means anything."""

    table: str
    env: str
    function_id: str
    name: str
    filename: str
    description: str
    valves_source: str | None  # a file in owc/owui holding ``class Valves``; None: the Function has none
    may_be_global: bool


SECTIONS = (
    Section(
        "pipe", "PIPE", PIPE_ID, "OpenClaw", "openclaw_pipe.py",
        "OpenClaw agent runs in Open WebUI chats, through owc", "functions/openclaw_pipe.py", False,
    ),
    Section(
        "startup", "STARTUP", EVENT_ID, "OpenClaw startup", "openclaw_startup.py",
        "Starts owc's runtime when Open WebUI starts", None, False,
    ),
    Section(
        "thinking", "THINKING", FILTER_ID, "OpenClaw thinking", "openclaw_thinking.py",
        "The thinking level of OpenClaw's replies", "thinking_filter.py", True,
    ),
    Section(
        "status", "STATUS", ACTION_ID, ACTION_NAME, "openclaw_status.py",
        "The chat's OpenClaw session: context, limits, sub-agents, Compact", "status_action.py", True,
    ),
)  # fmt: skip


def valves_in(source: str) -> dict[str, Valve]:
    """The fields of the first ``class Valves`` in ``source``: name, type (an annotation that is not one of
    ``str``, ``int``, ``float``, ``bool`` is taken as text: a ``Literal`` alias is), and whether Open WebUI masks
    it (a ``json_schema_extra`` naming ``password``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "Valves":
            found = {}
            for item in node.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                    continue
                kind = item.annotation.id if isinstance(item.annotation, ast.Name) else "str"
                extra = ""
                if isinstance(item.value, ast.Call):
                    extra = " ".join(ast.unparse(k.value) for k in item.value.keywords if k.arg == "json_schema_extra")
                name = item.target.id
                found[name] = Valve(name, kind if kind in ("int", "float", "bool") else "str", "password" in extra)
            return found
    return {}


def section_valves(section: Section) -> dict[str, Valve]:
    if section.valves_source is None:
        return {}
    return valves_in(resources.files("owc.owui").joinpath(section.valves_source).read_text(encoding="utf-8"))


@attrs.frozen
class FunctionSpec:
    """One Function as it is to be: ``active`` / ``is_global`` None: left as they are; ``valves``: set over the
    saved ones (a valve not named is kept)."""

    section: Section
    function_id: str
    active: bool | None = True
    is_global: bool | None = None
    valves: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    secret_valves: frozenset[str] = frozenset()


@attrs.frozen
class Connection:
    """Where Open WebUI is and who signs in. ``wait_s``: how long to wait for Open WebUI to answer at all (a
    transport timer); ``connect_wait_s``: how long to wait for owc's hello to the Gateway before listing models."""

    url: str
    admin_email: str
    admin_password: str = attrs.field(repr=False)
    wait_s: float = DEFAULT_WAIT_S
    connect_wait_s: float = DEFAULT_CONNECT_WAIT_S


@attrs.frozen
class InstallSpec:
    connection: Connection
    functions: tuple[FunctionSpec, ...]

    @property
    def pipe_id(self) -> str:
        return next(f.function_id for f in self.functions if f.section.table == "pipe")


# ----------------------------------------------------------------------------------------------- values


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(type(value), "a table")


def _read_secret(path_text: Any, where: str, base: Path | None) -> str:
    """The stripped content of the file ``path_text`` names (relative to ``base``, the configuration's folder).
    Never says the content."""
    if not isinstance(path_text, str) or not path_text.strip():
        raise ConfigUsageError(f"{where}: file must be a path (a non-empty string)")
    path = Path(path_text).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigFileError(f"{where}: cannot read {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"{where}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text:
        raise ConfigFileError(f"{where}: {path} is empty")
    return text


def _typed(valve: Valve, value: Any, where: str) -> Any:
    """``value`` checked against the valve's type (TOML's own types: no coercion)."""
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }[valve.kind]
    if not ok:
        want = {"bool": "a boolean", "int": "an integer", "float": "a number", "str": "a string"}[valve.kind]
        raise ConfigUsageError(f"{where} must be {want}, not {_type_name(value)}")
    return float(value) if valve.kind == "float" else value


def _from_text(valve: Valve, text: str, where: str) -> Any:
    """An environment variable's text as the valve's type."""
    if valve.kind == "str":
        return text
    if valve.kind == "bool":
        return _bool_text(text, where)
    try:
        return int(text) if valve.kind == "int" else float(text)
    except ValueError:
        want = "an integer" if valve.kind == "int" else "a number"
        raise ConfigUsageError(f"{where} must be {want}") from None


def _bool_text(text: str, where: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigUsageError(f"{where} must be true or false")


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigUsageError(f"{where} must be a number of seconds, not {_type_name(value)}")
    if not (0 <= value <= MAX_WAIT_S) or math.isnan(value):
        raise ConfigUsageError(f"{where} must be between 0 and {MAX_WAIT_S:g} seconds")
    return float(value)


def _seconds_text(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigUsageError(f"{where} must be a number of seconds") from None
    return _seconds(value, where)


# ----------------------------------------------------------------------------------------------- TOML


_OWUI_KEYS = ("url", "admin_email", "admin_password_file", "wait", "connect_wait")


def load_toml(path: Path, environ: Mapping[str, str] | None = None) -> InstallSpec:
    """The ``--config`` file as an ``InstallSpec``. The admin's password: ``admin_password_file``, else
    ``OWC_OWUI_ADMIN_PASSWORD_FILE`` / ``OWC_OWUI_ADMIN_PASSWORD`` from the environment (a deploy's secret)."""
    env = os.environ if environ is None else environ
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigUsageError(f"cannot read the configuration {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigUsageError(f"{path} is not TOML: {str(exc).splitlines()[0]}") from None
    return from_mapping(data, base=path.parent, environ=env)


def from_mapping(data: Mapping[str, Any], *, base: Path | None, environ: Mapping[str, str]) -> InstallSpec:
    """A parsed TOML document as an ``InstallSpec`` (see the module doc), or one ``ConfigUsageError`` line."""
    tables = {"openwebui", *(s.table for s in SECTIONS)}
    for key in data:
        if key not in tables:
            raise ConfigUsageError(f"unknown key {key!r} (the tables are: {', '.join(sorted(tables))})")
    owui = _table(data, "openwebui")
    for key in owui:
        if key not in _OWUI_KEYS:
            raise ConfigUsageError(f"unknown key 'openwebui.{key}' (known: {', '.join(_OWUI_KEYS)})")
    url = _required_text(owui, "url", "openwebui.url")
    email = _required_text(owui, "admin_email", "openwebui.admin_email")
    if "admin_password_file" in owui:
        password = _read_secret(owui["admin_password_file"], "openwebui.admin_password_file", base)
    else:
        password = _password_from_env(environ, "set openwebui.admin_password_file")
    connection = Connection(
        url=url,
        admin_email=email,
        admin_password=password,
        wait_s=_seconds(owui["wait"], "openwebui.wait") if "wait" in owui else DEFAULT_WAIT_S,
        connect_wait_s=(
            _seconds(owui["connect_wait"], "openwebui.connect_wait")
            if "connect_wait" in owui
            else DEFAULT_CONNECT_WAIT_S
        ),
    )
    return InstallSpec(connection, tuple(_function_from_table(s, _table(data, s.table), base) for s in SECTIONS))


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigUsageError(f"{key} must be a table ([{key}]), not {_type_name(value)}")
    return value


def _required_text(table: Mapping[str, Any], key: str, where: str) -> str:
    if key not in table:
        raise ConfigUsageError(f"{where} is missing")
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise ConfigUsageError(f"{where} must be a non-empty string")
    return value.strip()


def _function_from_table(section: Section, table: Mapping[str, Any], base: Path | None) -> FunctionSpec:
    known = (
        ["active", "valves"]
        + (["global"] if section.may_be_global else [])
        + (["id"] if section.table == "pipe" else [])
    )
    for key in table:
        if key not in known:
            raise ConfigUsageError(f"unknown key '{section.table}.{key}' (known: {', '.join(known)})")
    function_id = section.function_id
    if "id" in table:
        function_id = _required_text(table, "id", f"{section.table}.id")
    flags = {}
    for key in ("active", "global"):
        if key in table and not isinstance(table[key], bool):
            raise ConfigUsageError(f"{section.table}.{key} must be a boolean, not {_type_name(table[key])}")
        flags[key] = table.get(key)
    valves_table = table.get("valves", {})
    if not isinstance(valves_table, Mapping):
        raise ConfigUsageError(f"{section.table}.valves must be a table, not {_type_name(valves_table)}")
    schema = section_valves(section)
    valves, secrets = {}, set()
    for name, value in valves_table.items():
        where = f"{section.table}.valves.{name}"
        valve = schema.get(name)
        if valve is None:
            known_valves = ", ".join(schema) or "none"
            raise ConfigUsageError(f"unknown key '{where}' (the {section.name} Function's valves: {known_valves})")
        if isinstance(value, Mapping):
            if set(value) != {"file"}:
                raise ConfigUsageError(f"{where}: a table here holds exactly one key, file (a path to read)")
            if valve.kind != "str":
                raise ConfigUsageError(f"{where}: only a text valve can be read from a file")
            valves[name] = _read_secret(value["file"], where, base)
        elif valve.secret:
            raise ConfigUsageError(
                f'{where} is a secret: give it as {{ file = "/path" }} (a file holding it), never in the configuration'
            )
        else:
            valves[name] = _typed(valve, value, where)
        if valve.secret:
            secrets.add(name)
    return FunctionSpec(
        section,
        function_id,
        active=flags["active"] if flags["active"] is not None else True,
        is_global=flags["global"],
        valves=valves,
        secret_valves=frozenset(secrets),
    )


def _password_from_env(env: Mapping[str, str], hint: str) -> str:
    if env.get("OWC_OWUI_ADMIN_PASSWORD_FILE", "").strip():
        return _read_secret(env["OWC_OWUI_ADMIN_PASSWORD_FILE"], "OWC_OWUI_ADMIN_PASSWORD_FILE", None)
    if env.get("OWC_OWUI_ADMIN_PASSWORD"):
        return env["OWC_OWUI_ADMIN_PASSWORD"]
    raise ConfigFileError(f"no admin password: {hint}, or OWC_OWUI_ADMIN_PASSWORD_FILE")


# ----------------------------------------------------------------------------------------------- environment

VALVE_PREFIX = "OWC_VALVE_"
VALVE_FILE_PREFIX = "OWC_VALVE_FILE_"
FUNCTION_PREFIX = "OWC_FUNCTION_"


def from_environ(environ: Mapping[str, str]) -> InstallSpec:
    """The environment form (see the module doc). A variable under ``OWC_VALVE_`` / ``OWC_FUNCTION_`` that names
    nothing is one ``ConfigUsageError`` line naming it."""
    env = environ
    url = env.get("OWC_OWUI_URL", "").strip()
    if not url:
        raise ConfigUsageError("no Open WebUI address: pass --config FILE or --url URL, or set OWC_OWUI_URL")
    email = env.get("OWC_OWUI_ADMIN_EMAIL", "").strip()
    if not email:
        raise ConfigUsageError("no admin email: set OWC_OWUI_ADMIN_EMAIL (or pass --admin-email)")
    password = _password_from_env(env, "set OWC_OWUI_ADMIN_PASSWORD_FILE (a file holding it)")
    wait = _seconds_text(env["OWC_OWUI_WAIT"], "OWC_OWUI_WAIT") if env.get("OWC_OWUI_WAIT") else DEFAULT_WAIT_S
    connect = (
        _seconds_text(env["OWC_OWUI_CONNECT_WAIT"], "OWC_OWUI_CONNECT_WAIT")
        if env.get("OWC_OWUI_CONNECT_WAIT")
        else DEFAULT_CONNECT_WAIT_S
    )
    connection = Connection(url, email, password, wait, connect)
    by_env = {s.env: s for s in SECTIONS}
    tables: dict[str, dict[str, Any]] = {s.table: {} for s in SECTIONS}
    wheres: dict[tuple[str, str], str] = {}
    for name, text in sorted(env.items()):
        if name.startswith(VALVE_FILE_PREFIX):
            valve = name.removeprefix(VALVE_FILE_PREFIX)
            tables["pipe"].setdefault("valves", {})[valve] = {"file": text}
            wheres[("pipe", valve)] = name
        elif name.startswith(VALVE_PREFIX):
            valve = name.removeprefix(VALVE_PREFIX)
            tables["pipe"].setdefault("valves", {})[valve] = text
            wheres[("pipe", valve)] = name
        elif name.startswith(FUNCTION_PREFIX):
            rest = name.removeprefix(FUNCTION_PREFIX)
            word, _, what = rest.partition("_")
            section = by_env.get(word)
            if section is None:
                raise ConfigUsageError(
                    f"unknown variable {name} (OWC_FUNCTION_ is followed by one of {', '.join(by_env)})"
                )
            if what in ("ACTIVE", "GLOBAL") and (what == "ACTIVE" or section.may_be_global):
                tables[section.table][what.lower()] = _bool_text(text, name)
            elif what == "ID" and section.table == "pipe":
                tables["pipe"]["id"] = text
            elif what.startswith("VALVE_") and section.table != "pipe" and section.valves_source is not None:
                wanted = what.removeprefix("VALVE_").lower()
                names = {v.lower(): v for v in section_valves(section)}
                valve = names.get(wanted, wanted)
                tables[section.table].setdefault("valves", {})[valve] = text
                wheres[(section.table, valve)] = name
            else:
                raise ConfigUsageError(f"unknown variable {name} (see owc owui install --help for the names)")
    functions = []
    for section in SECTIONS:
        table = tables[section.table]
        schema = section_valves(section)
        typed = {}
        for valve_name, value in table.get("valves", {}).items():
            where = wheres[(section.table, valve_name)]
            valve = schema.get(valve_name)
            if valve is None:
                raise ConfigUsageError(
                    f"unknown variable {where} (the {section.name} Function has no valve {valve_name})"
                )
            if isinstance(value, Mapping):
                typed[valve_name] = value
            elif valve.secret:
                raise ConfigUsageError(
                    f"{where}: {valve_name} is a secret valve: put it in a file and set"
                    f" {VALVE_FILE_PREFIX}{valve_name} to the file's path"
                )
            else:
                typed[valve_name] = _from_text(valve, value, where)
        if typed:
            table["valves"] = typed
        try:
            functions.append(_function_from_table(section, table, None))
        except ConfigUsageError as exc:  # a file form on a valve that is not text: said with the variable's name
            raise ConfigUsageError(_env_words(str(exc), section, wheres)) from None
    return InstallSpec(connection, tuple(functions))


def _env_words(line: str, section: Section, wheres: Mapping[tuple[str, str], str]) -> str:
    """A TOML-worded line with the environment variable's name in place of the TOML key."""
    for (table, valve), name in wheres.items():
        if table == section.table:
            line = line.replace(f"{table}.valves.{valve}", name)
    return line


def from_options(
    *,
    url: str,
    admin_email: str,
    admin_password: str,
    valves: Mapping[str, Any],
    wait_s: float = DEFAULT_WAIT_S,
    connect_wait_s: float = DEFAULT_CONNECT_WAIT_S,
) -> InstallSpec:
    """The command-line form (``--url --admin-email`` and the valve options) as the same spec: every Function
    active, ``global`` left as it is, the Pipe's valves those given (checked by ``owc.cli.owui``)."""
    functions = tuple(
        FunctionSpec(s, s.function_id, valves=dict(valves) if s.table == "pipe" else {}) for s in SECTIONS
    )
    return InstallSpec(Connection(url, admin_email, admin_password, wait_s, connect_wait_s), functions)
