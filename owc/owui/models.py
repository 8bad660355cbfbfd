"""Model selection for the OpenClaw Pipe: the Gateway's models as Open WebUI models, and back. Pure.

Open WebUI lists a manifold Pipe's ``pipes()`` entries as models ``<function id>.<sub id>`` (``openclaw.<sub id>``;
``functions.py:72-151`` of 0.12.4) and routes a chat to the Function by the part before the first dot
(``get_pipe_id``), so a sub id may hold dots, slashes and colons like Open WebUI's own model ids
(``openai/gpt-4.1``, ``llama3:8b``). This module decides what that list holds and what a chosen entry means:

* ``read_models``: the Gateway's ``models.list`` answer, read defensively (a hostile or newer payload never
  raises; what is valid is kept).
* ``manifold_entries``: the ``pipes()`` list. First the agent's own entry, sub id = the agent id (so the model
  ``openclaw.main`` of earlier releases keeps working), named "OpenClaw"; then one entry per Gateway model,
  sub id ``<agent id>~<model key, escaped>``, named ``<model name> (<provider>) · OpenClaw`` (the old system's
  names, inventory B1). A whitelist or a cap trims the list (B3); without a Gateway answer the list says so
  (B2) instead of failing.
* ``model_for_entry``: a sub id back to ``(agent id, model key or None)``; None is the agent's own default.
* ``session_patch_params`` / ``patched_model``: the ``sessions.patch`` that pins a chat's session to a model (or
  back to the default, ``model: null``) and the model its reply says the session now uses (B6).
* ``resolve``: what a turn's Open WebUI model id means: owc's own ids and the old Pipe's (``openclaw_gateway.default``,
  the presets ``.chatgpt`` ``.opus`` ``.sonnet`` ``.glm``, raw keys ``openclaw_gateway.<provider>/<model>``:
  inventory B1, B5), with the ``DEFAULT_MODEL`` valve standing in for the "OpenClaw" entry (B4, B6);
  ``default_model_options``: that valve's select (issue 28).

The real shapes were measured on the real Gateway 2026.9.6 (the realgw tier's install, its offline config plus
the models ``z-ai/glm-5.2`` and ``qwen3:8b``; once without and once with an ``agents.defaults.models`` allowlist)
and read in its source (``dist/`` of ``openclaw@2026.9.6``); the captured answers are the fixtures of
``tests/test_owui_models.py``. ``shared/reference/openclaw/frames/*.jsonl`` hold no ``models.list`` or
``sessions.patch`` call, only the two names in ``hello-ok.features.methods``.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

#: The Default entry's name: the name the one model of earlier releases had.
DEFAULT_NAME = "OpenClaw"
#: What every Gateway model's entry name ends with, so the picker shows whose models they are (inventory B1).
ENTRY_SUFFIX = " · OpenClaw"
#: Added to every name when the Gateway did not answer ``models.list`` (B2: honest, never an error page).
NOT_REACHED_SUFFIX = " (Gateway not reached)"
#: Added to a model the Gateway lists with ``available: false`` (``missing-auth``, ``auth-failed``, ``cooldown``).
#: It stays listed: a cooldown passes, and a chat pinned to it must keep a model id Open WebUI knows.
UNAVAILABLE_SUFFIX = " (unavailable)"
#: Between the agent id and the escaped model key in a Gateway model's sub id. OpenClaw agent ids never hold it
#: (``[a-z0-9][a-z0-9_-]{0,63}``, ``normalizeAgentId``), and it is unreserved in URLs (RFC 3986).
SEPARATOR = "~"
#: The ``MAX_MODELS`` valve of the old system: default 30, clamped to 1..100 (inventory, valves table).
DEFAULT_CAP = 30
CAP_MIN, CAP_MAX = 1, 100
#: At most this many ``models.list`` entries are read, and a key or name longer than these is not one a
#: Gateway sends: bounds against a hostile payload, far above any real catalog.
MAX_READ = 2000
MAX_KEY_CHARS = 300
MAX_NAME_CHARS = 120
MAX_TAGS = 16

#: Characters a model key keeps as they are in a sub id: the ones Open WebUI's own model ids already use.
#: Everything else (``~`` too) becomes ``~XX`` per UTF-8 byte, uppercase hex: a comma would split Open WebUI's
#: ``?models=a,b`` URL parameter, and ``?``, ``#``, ``&``, ``%``, space would break a naive URL.
_SAFE = frozenset(string.ascii_letters + string.digits + "._-/:")
_HEX = frozenset("0123456789ABCDEF")


def model_key(provider: str, model_id: str) -> str:
    """The Gateway's canonical ``provider/model`` key (``modelKey``, ``dist/model-key-2xbDA5NJ.mjs``): a model
    id that already starts with ``<provider>/`` (compared case-insensitively) is the key itself. This is what
    ``sessions.patch {model}`` accepts and what ``model not allowed: <key>`` names."""
    provider, model_id = provider.strip(), model_id.strip()
    if not provider:
        return model_id
    if not model_id:
        return provider
    if model_id.lower().startswith(provider.lower() + "/"):
        return model_id
    return f"{provider}/{model_id}"


@attrs.frozen
class GatewayModel:
    """One entry of ``models.list``: what owc needs to list it and to pin a session to it.

    ``models.list`` answers ``{models: [ModelChoice], ...}`` where ``ModelChoice`` is a closed object with
    required ``id``, ``name``, ``provider`` (non-empty strings) and optional ``alias``, ``tags`` (``"default"``
    marks the agent's default model, ``"configured"`` one from the allowlist), ``available`` and capability
    fields owc does not use (``contextWindow``, ``reasoning``, ``thinkingLevels``, ``thinkingDefault``, ...):
    ``ModelChoiceSchema``, ``dist/src-BRUl7oDv.mjs:302-313``; ``buildPublicModelProjection`` and
    ``createPublicModelsListProjector``, ``dist/models-list-result-DVZiW-MI.mjs``. Measured (2026.9.6)::

        {"models": [{"id": "fake-model", "name": "Fake Model", "provider": "fake", "contextWindow": 128000,
                     "reasoning": false, "tags": ["default"], "thinkingLevels": [{"id": "off", "label": "off"}],
                     "thinkingDefault": "off", "available": true},
                    {"id": "z-ai/glm-5.2", "name": "GLM 5.2", "provider": "fake", ...}]}
    """

    provider: str
    id: str
    name: str
    alias: str | None = None
    tags: tuple[str, ...] = ()
    available: bool | None = None

    @property
    def key(self) -> str:
        """The canonical ``provider/model`` key (``model_key``)."""
        return model_key(self.provider, self.id)

    @property
    def is_default(self) -> bool:
        """The agent's own default model (the Gateway tags it ``"default"``)."""
        return "default" in self.tags


def _text(value: Any, limit: int) -> str | None:
    """A non-empty single-line string of at most ``limit`` characters, or None: control and format characters
    (newlines, bidi overrides) are dropped and whitespace runs collapsed, since names end up in a picker."""
    if not isinstance(value, str):
        return None
    spaced = "".join(" " if ch.isspace() else ch for ch in value)
    cleaned = "".join(ch for ch in spaced if unicodedata.category(ch) not in ("Cc", "Cf"))
    cleaned = " ".join(cleaned.split())
    if not cleaned:
        return None
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _ident(value: Any) -> str | None:
    """A provider or model id as the Gateway sends it (non-empty, stripped), or None. Unlike a name it is not
    rewritten: it must reach ``sessions.patch`` unchanged. Control characters make it invalid."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or len(value) > MAX_KEY_CHARS or any(unicodedata.category(ch) == "Cc" for ch in value):
        return None
    return value


def read_models(payload: Any) -> list[GatewayModel]:
    """The models of a ``models.list`` reply's ``payload``, in the Gateway's order, each key once.

    Never raises: a payload that is not ``{"models": [...]}`` gives ``[]``; an entry without a usable ``id`` or
    ``provider`` (missing, not a string, empty, control characters, over ``MAX_KEY_CHARS``) is skipped, and so is
    a second entry with a key already read. A missing or unusable ``name`` falls back to the alias, then the id
    (the old system's ``_friendly_name``): the entry can still be pinned, so it is kept. Only the first
    ``MAX_READ`` entries are looked at. Where the shape comes from: ``GatewayModel``."""
    if not isinstance(payload, dict):
        return []
    entries = payload.get("models")
    if not isinstance(entries, list):
        return []
    out: list[GatewayModel] = []
    seen: set[str] = set()
    for entry in entries[:MAX_READ]:
        if not isinstance(entry, dict):
            continue
        provider, model_id = _ident(entry.get("provider")), _ident(entry.get("id"))
        if provider is None or model_id is None:
            continue
        alias = _text(entry.get("alias"), MAX_NAME_CHARS)
        name = _text(entry.get("name"), MAX_NAME_CHARS) or alias or _text(model_id, MAX_NAME_CHARS) or model_id
        raw_tags = entry.get("tags")
        tags = tuple(t for t in raw_tags if isinstance(t, str) and t)[:MAX_TAGS] if isinstance(raw_tags, list) else ()
        available = entry.get("available")
        model = GatewayModel(
            provider=provider,
            id=model_id,
            name=name,
            alias=alias,
            tags=tags,
            available=available if isinstance(available, bool) else None,
        )
        if model.key in seen:
            continue
        seen.add(model.key)
        out.append(model)
    return out


# ---------------------------------------------------------------------------------------------- sub ids


def _escape(text: str) -> str:
    return "".join(ch if ch in _SAFE else "".join(f"~{b:02X}" for b in ch.encode("utf-8")) for ch in text)


def _unescape(text: str) -> str | None:
    """The inverse of ``_escape``, or None for text ``_escape`` never makes (a bad escape, lowercase hex, a
    character that should have been escaped, bytes that are not UTF-8): one key, one sub id."""
    raw = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "~":
            pair = text[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                return None
            raw.append(int(pair, 16))
            i += 3
        elif ch in _SAFE:
            raw.append(ord(ch))
            i += 1
        else:
            return None
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return decoded if _escape(decoded) == text else None


def entry_id(agent_id: str, key: str) -> str:
    """The sub id of a Gateway model's entry: ``<agent id>~<key, escaped>``, e.g. ``main~openrouter/z-ai/glm-5.2``
    or ``main~ollama/qwen3:8b`` (slashes, dots, colons kept; anything else ``~XX``). Stable: the same agent and
    key always give the same id, so a chat pinned to it keeps working across listings."""
    return f"{agent_id}{SEPARATOR}{_escape(key)}"


def lasting_name(name: str) -> str:
    """An entry's name without what only holds now: the suffix that says the Gateway was not reached or refused
    owc (``NOT_REACHED_SUFFIX``, a refusal's gist) and ``UNAVAILABLE_SUFFIX``. Every name owc lists ends with
    ``OpenClaw`` before those (``DEFAULT_NAME``, ``ENTRY_SUFFIX``): what follows its last ``OpenClaw`` is such a
    suffix. For a name kept where it outlives the moment (a model row the installer writes: Open WebUI shows a row's
    name over the Pipe's, so "(wrong token ...)" written there would stay after the token is fixed)."""
    at = name.rfind(DEFAULT_NAME)
    rest = name[at + len(DEFAULT_NAME) :] if at >= 0 else ""
    if not (rest.startswith(" (") and rest.endswith(")")):
        return name
    return name[: at + len(DEFAULT_NAME)]


def model_for_entry(sub_id: str) -> tuple[str, str | None]:
    """The agent and model key a sub id stands for; model None is the agent's own default.

    ``main`` -> ``("main", None)``; ``main~ollama/qwen3:8b`` -> ``("main", "ollama/qwen3:8b")``. Never raises:
    a sub id owc never lists (an empty or malformed key part) maps to the agent's default, the one choice that
    always exists. The agent is returned as written; the caller checks it is its own ``AGENT_ID`` (an entry
    listed before the valve changed names the old agent). The full Open WebUI model id (``openclaw.main~...``)
    is ``entry_of_model_id``'s input."""
    if not isinstance(sub_id, str):
        return "", None
    agent, sep, escaped = sub_id.partition(SEPARATOR)
    if not sep:
        return sub_id, None
    key = _unescape(escaped) if escaped else None
    return agent, key or None


def entry_of_model_id(model_id: str) -> str:
    """The sub id in an Open WebUI model id: what follows the first dot (``openclaw.main~a/b.c`` ->
    ``main~a/b.c``), split as Open WebUI's ``get_pipe_id`` splits it; an id without a dot is returned whole."""
    if not isinstance(model_id, str):
        return ""
    _, sep, rest = model_id.partition(".")
    return rest if sep else model_id


# ---------------------------------------------------------------------------------------------- the list


def parse_whitelist(whitelist: str | Iterable[str] | None) -> tuple[str, ...]:
    """The whitelist's items, each stripped and case-folded, empty ones dropped, each once, in order. A valve
    gives one string, comma-separated (``CONFIGURED_MODELS`` of the old system); a list of items is taken too.
    A comma therefore cannot be part of an item (no real model key or name has one)."""
    if whitelist is None:
        return ()
    items = whitelist.split(",") if isinstance(whitelist, str) else list(whitelist)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        folded = item.strip().casefold()
        if folded and folded not in out:
            out.append(folded)
    return tuple(out)


def _names(model: GatewayModel) -> set[str]:
    return {n.casefold() for n in (model.key, model.id, model.name, model.alias) if n}


def clamp_cap(cap: Any) -> int:
    """The ``MAX_MODELS`` valve as used: an int clamped to 1..100; anything else (None, a bool, text) is 30."""
    if isinstance(cap, bool) or not isinstance(cap, int):
        return DEFAULT_CAP
    return min(max(cap, CAP_MIN), CAP_MAX)


def select_models(
    models: Sequence[GatewayModel], *, whitelist: str | Iterable[str] | None, cap: Any
) -> list[GatewayModel]:
    """The Gateway models to list, each once.

    With a whitelist: every model that an item names, in the whitelist's order (the admin's), then the
    Gateway's. An item names a model when it equals, case-insensitively after trimming, the model's key
    (``openai/gpt-5.5``), its id (``gpt-5.5``: the same id under two providers names both), its name
    (``GPT-5.5``) or its alias. An item that names nothing is ignored (``whitelist_misses`` reports it).
    Without one: the first ``cap`` models (``clamp_cap``) in the Gateway's order. Either way at most
    ``CAP_MAX``."""
    items = parse_whitelist(whitelist)
    if not items:
        return list(models[: clamp_cap(cap)])
    named = [(model, _names(model)) for model in models]
    out: list[GatewayModel] = []
    for item in items:
        out += [model for model, names in named if item in names and model not in out]
    return out[:CAP_MAX]


def whitelist_misses(models: Sequence[GatewayModel], whitelist: str | Iterable[str] | None) -> tuple[str, ...]:
    """The whitelist items (case-folded) that name no model: worth a log line, since the admin expects them."""
    names: set[str] = set()
    for model in models:
        names |= _names(model)
    return tuple(item for item in parse_whitelist(whitelist) if item not in names)


def entry_name(model: GatewayModel) -> str:
    """``<name> (<provider>) · OpenClaw``, plus `` (unavailable)`` when the Gateway says it cannot run now."""
    name = f"{model.name} ({model.provider}){ENTRY_SUFFIX}"
    return name + UNAVAILABLE_SUFFIX if model.available is False else name


def manifold_entries(
    agent_id: str,
    models: Sequence[GatewayModel],
    *,
    whitelist: str | Iterable[str] | None,
    cap: Any,
    reached: bool,
    why: str | None = None,
    old_ids: bool = False,
    presets: Mapping[str, str] | None = None,
    agents: Sequence[GatewayAgent] = (),
    agent_whitelist: str | Iterable[str] | None = None,
    agent_models: Mapping[str, Sequence[GatewayModel]] | None = None,
) -> list[dict[str, str]]:
    """The Pipe's ``pipes()`` list: ``[{"id": <sub id>, "name": <display name>}, ...]``.

    Issue 31: after the Default entry, one entry per other agent of the Gateway (``agents``, ``agents.list``'s
    roster, ``agent_entries``: sub id = the agent id, so its model id is ``openclaw.<agent>``), then the Gateway
    models of the Default entry's agent, then those of each listed agent ``agent_models`` holds models for (the
    ``AGENT_MODELS`` valve): ``<agent>~<key>``, named with the agent's name.

    First the Default entry, ``{"id": agent_id, "name": "OpenClaw"}``: the agent's own model, and the model id
    ``openclaw.<agent id>`` chats of earlier releases already use. Then one entry per model ``select_models``
    keeps, sub id ``entry_id(agent_id, key)``. ``reached`` says ``models`` is the Gateway's answer; when it is
    False every name gets `` (Gateway not reached)``: ``models`` is then whatever the caller still knows (its
    last answer, so chats pinned to a model keep a model id Open WebUI knows), or ``[]`` for the Default entry
    alone. An ``agent_id`` holding ``~`` (never a valid OpenClaw agent id) gets the Default entry only, since its
    model entries could not be read back. ``why``: what keeps the Gateway from answering, when owc knows (a refusal's
    few words, naming the fix: ``owc.protocol.refusals``), said instead of "Gateway not reached". Never raises on
    what ``read_models`` returns.

    ``old_ids``: owc serves the old Pipe's Function id (``serves_old_ids``), whose chats carry the old model ids.
    Open WebUI 0.12.4 answers a chat only on a model id it lists (``chat_completion`` in ``main.py``: "Model not
    found"; a ``pipes()`` entry cannot be hidden, only ``id`` and ``name`` are read), so the list is made of those
    ids, each choice once: the Default entry is ``default`` (the old ``OpenClaw · Default``), a Gateway model its
    raw key (``openai/gpt-5.5``, B1; a key ``resolve`` would not read back raw, whose provider part holds ``~``,
    keeps owc's entry id), and the four presets (``presets``, from ``preset_models``) come last, named as old
    ones. A raw key is listed only while the Gateway lists it, as the old Pipe did."""
    suffix = "" if reached else (f" ({why})" if why else NOT_REACHED_SUFFIX)
    listed = agent_entries(agents, agent_id, whitelist=agent_whitelist, old_ids=old_ids)
    if old_ids:
        entries = _old_entries(agent_id, models, whitelist=whitelist, cap=cap, suffix=suffix, presets=presets)
        return entries[:1] + [_suffixed(e, suffix) for e in listed] + entries[1:]
    entries = [{"id": agent_id, "name": DEFAULT_NAME + suffix}]
    if SEPARATOR in agent_id:
        return entries
    entries += [_suffixed(e, suffix) for e in listed]
    for model in select_models(models, whitelist=whitelist, cap=cap):
        entries.append({"id": entry_id(agent_id, model.key), "name": entry_name(model) + suffix})
    by_id = {a.id: a for a in agents if _is_agent(a)}
    for entry in listed:
        agent = by_id[entry["id"]]
        for model in select_models(list((agent_models or {}).get(agent.id, ())), whitelist=whitelist, cap=cap):
            name = f"{model.name} ({model.provider}) · {agent.label}{ENTRY_SUFFIX}"
            name += UNAVAILABLE_SUFFIX if model.available is False else ""
            entries.append({"id": entry_id(agent.id, model.key), "name": name + suffix})
    return entries


class GatewayAgent(Protocol):
    """An agent of the Gateway's roster as this module reads it (``owc.protocol.agents.GatewayAgent``; this module
    imports nothing of owc's, so it names only the fields it uses)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def emoji(self) -> str | None: ...
    @property
    def avatar_url(self) -> str | None: ...
    @property
    def label(self) -> str: ...


_AGENT_FIRST = frozenset(string.ascii_lowercase + string.digits)
_AGENT_REST = _AGENT_FIRST | {"_", "-"}


def is_agent_id(value: Any) -> bool:
    """``value`` is a valid OpenClaw agent id, ``[a-z0-9][a-z0-9_-]{0,63}`` (``normalizeAgentId``; the same test
    as ``owc.protocol.agents.is_agent_id``, without its regular expression: this module imports no more)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 64
        and value[0] in _AGENT_FIRST
        and all(ch in _AGENT_REST for ch in value[1:])
    )


def _is_agent(agent: Any) -> bool:
    return is_agent_id(getattr(agent, "id", None)) and isinstance(getattr(agent, "label", None), str)


def _suffixed(entry: dict[str, str], suffix: str) -> dict[str, str]:
    return {"id": entry["id"], "name": entry["name"] + suffix}


# ---------------------------------------------------------------------------------------------- agents (issue 31)


def agent_name(agent: GatewayAgent) -> str:
    """An agent's entry name: ``<emoji> <name> · OpenClaw`` (``🍵 Matcha · OpenClaw``), its id when the Gateway
    names it not. Ends with ``OpenClaw`` like every entry owc lists, so ``lasting_name`` reads it."""
    head = f"{agent.emoji} {agent.label}" if agent.emoji else agent.label
    return head + ENTRY_SUFFIX


def select_agents(
    agents: Sequence[GatewayAgent], own: str, *, whitelist: str | Iterable[str] | None
) -> list[GatewayAgent]:
    """The agents listed as their own models, in the Gateway's order: every agent but ``own`` (the Default entry's,
    the ``AGENT_ID`` valve's: it is the "OpenClaw" entry), and with a whitelist (``AGENT_WHITELIST``, comma-separated)
    only those an item names: its id or its name, case-insensitively. An agent id that is not a valid OpenClaw id
    (never from ``read_agents``) is left out: its entry could not be read back."""
    items = parse_whitelist(whitelist)
    out: list[GatewayAgent] = []
    for agent in agents:
        if not _is_agent(agent) or agent.id == own:
            continue
        if items and not ({agent.id.casefold(), (agent.name or "").casefold()} & set(items)):
            continue
        if agent not in out:
            out.append(agent)
    return out


def agent_entries(
    agents: Sequence[GatewayAgent], own: str, *, whitelist: str | Iterable[str] | None, old_ids: bool = False
) -> list[dict[str, str]]:
    """One ``pipes()`` entry per agent ``select_agents`` keeps: ``{"id": <agent id>, "name": agent_name(...)}``.
    Under the old Function id (``old_ids``) an agent whose id is one of the old Pipe's words (``default`` and the
    presets) is not listed: there ``resolve`` reads the word, which its old chats carry."""
    taken = {OLD_DEFAULT_ENTRY} | {p.name for p in PRESETS} if old_ids else set()
    return [
        {"id": a.id, "name": agent_name(a)}
        for a in select_agents(agents, own, whitelist=whitelist)
        if a.id not in taken
    ]


def agent_model_meta(agent: GatewayAgent) -> dict[str, Any]:
    """What a model row for an agent's entry (``openclaw.<agent>``) should hold in its ``meta`` for Open WebUI 0.12.4
    to show the agent's avatar: ``profile_image_url`` (served by ``/api/v1/models/model/profile/image``: a raster
    ``data:image/...`` inline, an ``http(s)`` URL by redirect when ``ENABLE_PROFILE_IMAGE_URL_FORWARDING``) and a
    description naming the agent. A ``pipes()`` entry carries only ``id`` and ``name`` (``get_function_models``), so
    the avatar needs the row; for the installer (``owc owui install``)."""
    meta: dict[str, Any] = {"description": f"The OpenClaw agent {agent.label} ({agent.id})"}
    if agent.avatar_url:
        meta["profile_image_url"] = agent.avatar_url
    return meta


def _old_entries(
    agent_id: str,
    models: Sequence[GatewayModel],
    *,
    whitelist: str | Iterable[str] | None,
    cap: Any,
    suffix: str,
    presets: Mapping[str, str] | None,
) -> list[dict[str, str]]:
    """``manifold_entries`` under the old Function id (see there)."""
    entries = [{"id": OLD_DEFAULT_ENTRY, "name": DEFAULT_NAME + suffix}]
    for model in select_models(models, whitelist=whitelist, cap=cap):
        sub_id = model.key if _raw_key(model.key) is not None else entry_id(agent_id, model.key)
        entries.append({"id": sub_id, "name": entry_name(model) + suffix})
    chosen = _presets(presets)
    for preset in PRESETS:
        name = f"{chosen[preset.name]} (old {preset.label} preset){ENTRY_SUFFIX}"
        entries.append({"id": preset.name, "name": name + suffix})
    return entries


# ---------------------------------------------------------------------------------------------- sessions.patch


def session_patch_params(session_key: str, model: str | None) -> dict[str, Any]:
    """The ``sessions.patch`` params that pin a session to ``model`` (a model key), or with None back to the
    agent's default: ``{"key": <session key>, "model": <key> | null}``.

    Verified on 2026.9.6: ``SessionsPatchParamsSchema`` (``dist/src-BRUl7oDv.mjs:2140-2152``, a closed object)
    requires ``key`` and takes ``model: NonEmptyString | null``; ``null`` restores the agent's default
    (``sessions-patch-C2RToUnX.mjs:468-480``; measured: the reply's ``entry`` then says
    ``modelOverrideSource: "default"`` and ``resolved`` the default model). Only ``key`` and ``model`` need
    ``operator.write`` (``resolveSessionsPatchRequiredScope``, ``dist/method-scopes-C7g7eSZh.mjs:91-95``; other
    fields can need ``operator.admin``). A key the Gateway has no session for yet gets one (measured:
    ``sessions.describe`` said ``{"session": null}`` before, the patch answered ``ok`` and created it).

    Raises ValueError for an empty session key or model: these are owc's own values, and the Gateway would
    refuse them (``"invalid sessions.patch params: at /model: must not have fewer than 1 characters; ..."``)."""
    if not isinstance(session_key, str) or not session_key.strip():
        raise ValueError("sessions.patch needs a session key")
    if model is None:
        return {"key": session_key, "model": None}
    if not isinstance(model, str) or not model.strip():
        raise ValueError("a model key is a non-empty string (None means the agent's default)")
    return {"key": session_key, "model": model.strip()}


def patched_model(payload: Any) -> str | None:
    """The model key a ``sessions.patch`` reply says the session now runs, or None if it does not say.

    The reply (``projectSessionPatchResult``, ``dist/session-utils-model-CCof62cq.mjs:354-399``; measured) is
    ``{ok: true, path, key, entry: {..., providerOverride?, modelOverride?, modelOverrideSource}, resolved:
    {modelProvider, model, agentRuntime, runtimeSelectionLocked, thinkingLevel?, thinkingLevels?}}``;
    ``resolved`` is the effective model also after ``model: null`` (the default). Never raises."""
    if not isinstance(payload, dict):
        return None
    resolved = payload.get("resolved")
    if not isinstance(resolved, dict):
        return None
    provider, model = _ident(resolved.get("modelProvider")), _ident(resolved.get("model"))
    if provider is None or model is None:
        return None
    return model_key(provider, model)


# ------------------------------------------------------------------------------- old ids, the default model

#: The old Pipe's Function id (inventory B1, B5). The migration installs owc's Pipe under it, so Open WebUI routes
#: the old chats (``openclaw_gateway.<sub id>``) to owc; under it owc lists and reads the old sub ids first.
OLD_FUNCTION_ID = "openclaw_gateway"
#: The old Pipe's Default entry: ``openclaw_gateway.default``, named ``OpenClaw · Default``.
OLD_DEFAULT_ENTRY = "default"
#: The ``DEFAULT_MODEL`` select's empty choice: no model pinned, the agent's own default.
AGENT_DEFAULT_LABEL = "The agent's own default"


@attrs.frozen
class Preset:
    """One of the old Pipe's model presets (B5): the sub id its chats carry, the valve that names its model now,
    and the old valve's default."""

    name: str
    valve: str
    default: str
    label: str


#: The old Pipe's four presets with their valves' defaults (inventory, the valves table).
PRESETS: tuple[Preset, ...] = (
    Preset("chatgpt", "CHATGPT_MODEL", "openai/gpt-5.5", "ChatGPT"),
    Preset("opus", "OPUS_MODEL", "anthropic/claude-opus-4-8", "Opus"),
    Preset("sonnet", "SONNET_MODEL", "anthropic/claude-sonnet-5", "Sonnet"),
    Preset("glm", "GLM_MODEL", "openrouter/z-ai/glm-5.2", "GLM"),
)


def _valve(valves: Any, name: str) -> str:
    """A valve as text, stripped ('' when unset or not text): Valves are a pydantic model or a mapping."""
    raw = valves.get(name) if isinstance(valves, Mapping) else getattr(valves, name, None)
    return raw.strip() if isinstance(raw, str) else ""


def preset_models(valves: Any) -> dict[str, str]:
    """Each preset's model key: its valve (``CHATGPT_MODEL``, ...), or the old default when the valve is empty or
    not a usable key. Never raises."""
    return {p.name: _ident(_valve(valves, p.valve)) or p.default for p in PRESETS}


def _presets(presets: Mapping[str, str] | None) -> dict[str, str]:
    """``presets`` completed with the old defaults (None: all defaults), each value a usable key."""
    given = presets if isinstance(presets, Mapping) else {}
    return {p.name: _ident(given.get(p.name)) or p.default for p in PRESETS}


def default_model_of(valves: Any) -> str:
    """The ``DEFAULT_MODEL`` valve as a model key, '' when empty (the agent's own default) or not a usable key."""
    return _ident(_valve(valves, "DEFAULT_MODEL")) or ""


def function_id_of_module(module_name: Any) -> str | None:
    """The Function id Open WebUI 0.12.4 loaded a Function file under, from the module's name, or None.

    ``load_function_module_by_id`` (``utils/plugin.py``) executes the file in a module named
    ``function_<id>_<uuid4 hex>``, so a class the file defines (its Valves) carries that name as ``__module__``:
    the one place a Function learns its own id (``pipes()`` is called without it)."""
    if not isinstance(module_name, str) or not module_name.startswith("function_"):
        return None
    function_id, sep, tail = module_name[len("function_") :].rpartition("_")
    if not sep or not function_id or len(tail) != 32 or not set(tail) <= set("0123456789abcdef"):
        return None
    return function_id


def serves_old_ids(valves: Any) -> bool:
    """These Valves belong to owc's Pipe installed under the old Pipe's Function id (``OLD_FUNCTION_ID``): its
    ``pipes()`` lists the old sub ids (``manifold_entries(old_ids=True)``)."""
    return function_id_of_module(getattr(type(valves), "__module__", None)) == OLD_FUNCTION_ID


def _raw_key(sub_id: str) -> str | None:
    """The raw model key a sub id is (the old Pipe's ``<provider>/<model>``), or None: it holds a ``/`` before any
    ``~`` and is a usable key as it stands. An agent id never holds ``/`` (``[a-z0-9][a-z0-9_-]{0,63}``), and
    owc's escaped entries have their ``~`` first, so owc's own ids never read so."""
    slash, tilde = sub_id.find("/"), sub_id.find(SEPARATOR)
    if slash <= 0 or (tilde != -1 and tilde < slash):
        return None
    key = _ident(sub_id)
    return key if key == sub_id else None


@attrs.frozen
class Resolved:
    """What a turn's model id means (``resolve``).

    ``agent``: the agent the entry names; ``model``: the model key to pin the session to, None for the agent's own
    default (``sessions.patch {model: null}``); ``keep``: the entry names another agent (listed before the
    ``AGENT_ID`` valve changed, or a sub id owc cannot read), so the session's model is left as it is
    (``owc.runtime.KEEP_MODEL``). ``reading``: which reading applied (the rows of ``resolve``'s table), for logs
    and tests."""

    agent: str
    model: str | None
    keep: bool = False
    reading: str = ""


def resolve(
    model_id: Any,
    agent_id: str,
    *,
    default_model: str = "",
    presets: Mapping[str, str] | None = None,
) -> Resolved:
    """What the turn's Open WebUI model id (the request body's ``model``) means for the agent ``agent_id`` (the
    ``AGENT_ID`` valve). The Function id is what precedes the first dot (as Open WebUI's ``get_pipe_id`` splits
    it), whatever it is; the sub id follows. Read in this order, the first that applies (``reading`` in brackets):

    1. empty (no model id): the "OpenClaw" entry [default];
    2. ``default`` under the Function id ``openclaw_gateway``: the "OpenClaw" entry, the old Default [old default];
    3. a preset name (``chatgpt``, ``opus``, ``sonnet``, ``glm``) under ``openclaw_gateway``: the model its valve
       names (``presets``; an empty valve, the old default) [preset];
    4. a raw key, a ``/`` before any ``~`` (``openai/gpt-5.5``, the old Pipe's entries): that key [old model];
    5. ``<agent>~<escaped key>`` of the own agent (owc's entries): that key [model];
    6. ``<agent>`` of the own agent, or its entry with a key ``entry_id`` never writes: the "OpenClaw" entry
       [default];
    7. anything else: an entry of another agent (or a sub id owc cannot read): the session's model is kept
       [another agent].

    The "OpenClaw" entry means ``default_model`` (the ``DEFAULT_MODEL`` valve) when it is set, else None: the
    agent's own default. Where a sub id reads two ways: under the old Function id the old words win (rows 2, 3),
    since its chats carry them and owc lists no ``<agent>`` entry there (an agent named ``glm`` or ``default`` is
    reached through owc's ids under another Function id); under any other Function id they are agent ids (row 6
    or 7), as owc always read them. A raw key (row 4) reads the same under every Function id: no agent id holds
    ``/``, so owc's own ids never look like one, and owc's escaped entries (row 5) have their ``~`` before any
    ``/`` (only a key whose provider holds ``~``, never seen, would be read as an escaped entry). Never raises."""
    text = model_id if isinstance(model_id, str) else ""
    function_id, dot, sub_id = text.partition(".")
    if not dot:
        function_id, sub_id = "", text
    default = _ident(default_model) or None
    if not sub_id:
        return Resolved(agent_id, default, reading="default")
    if function_id == OLD_FUNCTION_ID:
        if sub_id == OLD_DEFAULT_ENTRY:
            return Resolved(agent_id, default, reading="old default")
        chosen = _presets(presets)
        if sub_id in chosen:
            return Resolved(agent_id, chosen[sub_id], reading="preset")
    key = _raw_key(sub_id)
    if key is not None:
        return Resolved(agent_id, key, reading="old model")
    entry_agent, key = model_for_entry(sub_id)
    if entry_agent != agent_id:
        return Resolved(entry_agent, None, keep=True, reading="another agent")
    if key is None:
        return Resolved(agent_id, default, reading="default")
    return Resolved(agent_id, key, reading="model")


def resolve_with_valves(model_id: Any, agent_id: str, valves: Any) -> Resolved:
    """``resolve`` with the Pipe's Valves: ``DEFAULT_MODEL`` and the four preset valves."""
    return resolve(model_id, agent_id, default_model=default_model_of(valves), presets=preset_models(valves))


def resolve_agent(
    model_id: Any,
    agent_id: str,
    known: Iterable[str],
    *,
    default_model: str = "",
    presets: Mapping[str, str] | None = None,
) -> Resolved:
    """``resolve``, with the Gateway's other agents as models of their own (issue 31): where ``resolve`` reads
    another agent's entry (row 7), and that agent is one of ``known`` (the agents owc lists), the entry means that
    agent: ``<agent>`` its own default model (``model: None``) [agent], ``<agent>~<escaped key>`` that key on that
    agent [agent model]. An agent owc does not list (gone from the Gateway, whitelisted out, a sub id that is no agent
    id) reads as before: the session's model kept, the ``AGENT_ID`` agent's session. Never raises."""
    got = resolve(model_id, agent_id, default_model=default_model, presets=presets)
    if got.reading != "another agent" or got.agent not in set(known) or not is_agent_id(got.agent):
        return got
    agent, key = model_for_entry(entry_of_model_id(model_id if isinstance(model_id, str) else ""))
    if agent != got.agent:
        return got
    return Resolved(agent, key, reading="agent model" if key else "agent")


def default_model_options(models: Any, saved: Any = "") -> list[dict[str, str]]:
    """The ``DEFAULT_MODEL`` valve's select: ``[{"value": <key>, "label": <text>}, ...]``, as Open WebUI 0.12.4's
    ``NativeSelect`` shows options (a string or ``{value, label}``).

    First the empty choice (the agent's own default), then the Gateway's models as the runtime last listed them
    (``models``, ``GatewayModel`` items; anything else is skipped), then ``saved`` (the valve's saved value) when
    it is not among them, so the form still shows what is saved (a model the Gateway no longer lists, or owc not
    running: then the list is the empty choice and the saved value). Never raises: Open WebUI keeps a method that
    fails as the name of the method, which its form would show letter by letter."""
    known = [m for m in models if isinstance(m, GatewayModel)][:MAX_READ] if isinstance(models, Sequence) else []
    label = AGENT_DEFAULT_LABEL if known else AGENT_DEFAULT_LABEL + " (the Gateway's models show once owc lists them)"
    options = [{"value": "", "label": label}]
    seen = {""}
    for model in known:
        if model.key in seen:
            continue
        seen.add(model.key)
        unavailable = UNAVAILABLE_SUFFIX if model.available is False else ""
        options.append({"value": model.key, "label": f"{model.name} ({model.key}){unavailable}"})
    kept = _ident(saved) if isinstance(saved, str) else None
    if kept is not None and kept not in seen:
        options.append({"value": kept, "label": f"{kept} (saved; the Gateway does not list it now)"})
    return options
