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

The real shapes were measured on the real Gateway 2026.9.6 (the realgw tier's install, its offline config plus
the models ``z-ai/glm-5.2`` and ``qwen3:8b``; once without and once with an ``agents.defaults.models`` allowlist)
and read in its source (``dist/`` of ``openclaw@2026.9.6``); the captured answers are the fixtures of
``tests/test_owui_models.py``. ``shared/reference/openclaw/frames/*.jsonl`` hold no ``models.list`` or
``sessions.patch`` call, only the two names in ``hello-ok.features.methods``.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

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
) -> list[dict[str, str]]:
    """The Pipe's ``pipes()`` list: ``[{"id": <sub id>, "name": <display name>}, ...]``.

    First the Default entry, ``{"id": agent_id, "name": "OpenClaw"}``: the agent's own model, and the model id
    ``openclaw.<agent id>`` chats of earlier releases already use. Then one entry per model ``select_models``
    keeps, sub id ``entry_id(agent_id, key)``. ``reached`` says ``models`` is the Gateway's answer; when it is
    False every name gets `` (Gateway not reached)``: ``models`` is then whatever the caller still knows (its
    last answer, so chats pinned to a model keep a model id Open WebUI knows), or ``[]`` for the Default entry
    alone. An ``agent_id`` holding ``~`` (never a valid OpenClaw agent id) gets the Default entry only, since its
    model entries could not be read back. ``why``: what keeps the Gateway from answering, when owc knows (a refusal's
    few words, naming the fix: ``owc.protocol.refusals``), said instead of "Gateway not reached". Never raises on
    what ``read_models`` returns."""
    suffix = "" if reached else (f" ({why})" if why else NOT_REACHED_SUFFIX)
    entries = [{"id": agent_id, "name": DEFAULT_NAME + suffix}]
    if SEPARATOR in agent_id:
        return entries
    for model in select_models(models, whitelist=whitelist, cap=cap):
        entries.append({"id": entry_id(agent_id, model.key), "name": entry_name(model) + suffix})
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
