"""The Gateway's agents (``agents.list``), read defensively. Pure.

Measured on the real Gateway 2026.9.6 (``docs/measured/agents-2026.9.6.md``): ``agents.list`` takes ``{}`` (a closed
object: ``{"x": 1}`` is refused ``invalid agents.list params: at root: unexpected property 'x'``) and needs
``operator.read`` (``method-scopes-C7g7eSZh.mjs``; measured with read alone). It answers::

    {"defaultId": "main", "ownership": "legacy", "selectionRequired": false, "mainKey": "main",
     "scope": "per-sender",
     "agents": [{"id": "main", "workspace": ..., "model": {"primary": "fake/fake-model"}, ...},
                {"id": "matcha", "name": "Matcha",
                 "identity": {"name": "Matcha", "theme": "calm tea", "emoji": "🍵",
                              "avatar": "data:image/png;base64,...", "avatarUrl": "data:image/png;base64,..."},
                 ...}]}

The default agent comes first, the others sorted by id (``listGatewayAgentsBasic``). ``name`` is the configured
``agents.list[].name``, else ``identity.name``, and absent when neither is set (``main`` above). ``avatarUrl`` is an
``http(s)`` URL or a ``data:image/...`` URL (a workspace file is read into one); anything else is left out by the
Gateway (``resolveAgentAvatarUrlFromSource``)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import attrs

#: An OpenClaw agent id (``normalizeAgentId``): what a session key's ``agent:<id>:`` holds.
AGENT_ID_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
#: Bounds against a hostile payload, far above a real roster.
MAX_AGENTS = 200
MAX_NAME_CHARS = 80
MAX_EMOJI_CHARS = 16
#: A ``data:`` avatar larger than this is not carried (a picker icon; Open WebUI keeps it in a model row).
MAX_AVATAR_CHARS = 512 * 1024


def is_agent_id(value: Any) -> bool:
    """``value`` is a usable OpenClaw agent id."""
    return isinstance(value, str) and AGENT_ID_RE.fullmatch(value) is not None


@attrs.frozen
class GatewayAgent:
    """One agent of ``agents.list``: what owc lists it as. ``name`` is None when the Gateway names it not."""

    id: str
    name: str | None = None
    emoji: str | None = None
    avatar_url: str | None = None

    @property
    def label(self) -> str:
        """Its name, else its id."""
        return self.name or self.id


@attrs.frozen
class AgentRoster:
    """``agents.list``'s answer as owc uses it: the agents in the Gateway's order and its default agent."""

    agents: tuple[GatewayAgent, ...] = ()
    default_id: str | None = None

    def get(self, agent_id: str) -> GatewayAgent | None:
        return next((a for a in self.agents if a.id == agent_id), None)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(a.id for a in self.agents)


def _line(value: Any, limit: int) -> str | None:
    """A non-empty single line without control or format characters, at most ``limit`` characters (cut with an
    ellipsis), or None. Emoji (``So``) and the variation selectors they use (``Mn``) are kept."""
    if not isinstance(value, str):
        return None
    spaced = "".join(" " if ch.isspace() else ch for ch in value)
    cleaned = " ".join("".join(ch for ch in spaced if unicodedata.category(ch) not in ("Cc", "Cf")).split())
    if not cleaned:
        return None
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _avatar(value: Any) -> str | None:
    """An avatar URL Open WebUI can show as a model's image: ``https://``/``http://`` or a raster ``data:image/``
    URL (Open WebUI 0.12.4 serves a ``data:image`` of a known raster type and redirects an ``http`` one), bounded."""
    if not isinstance(value, str) or len(value) > MAX_AVATAR_CHARS or any(ch.isspace() for ch in value):
        return None
    lowered = value[:16].lower()
    if lowered.startswith(("https://", "http://")):
        return value
    if lowered.startswith("data:image/") and not lowered.startswith("data:image/svg"):
        return value
    return None


def read_agents(payload: Any) -> AgentRoster:
    """The agents of an ``agents.list`` reply's payload. Never raises: anything that is not the measured shape
    gives an empty roster; an entry without a usable id is skipped, a second entry with an id already read too.
    The name is ``name``, else ``identity.name``; the emoji ``identity.emoji``; the avatar ``identity.avatarUrl``
    (the Gateway's resolved URL), else ``identity.avatar`` when that is already a URL."""
    if not isinstance(payload, dict):
        return AgentRoster()
    entries = payload.get("agents")
    if not isinstance(entries, list):
        return AgentRoster()
    out: list[GatewayAgent] = []
    for entry in entries[:MAX_AGENTS]:
        if not isinstance(entry, dict) or not is_agent_id(entry.get("id")):
            continue
        if any(a.id == entry["id"] for a in out):
            continue
        identity = entry.get("identity") if isinstance(entry.get("identity"), dict) else {}
        out.append(
            GatewayAgent(
                id=entry["id"],
                name=_line(entry.get("name"), MAX_NAME_CHARS) or _line(identity.get("name"), MAX_NAME_CHARS),
                emoji=_line(identity.get("emoji"), MAX_EMOJI_CHARS),
                avatar_url=_avatar(identity.get("avatarUrl")) or _avatar(identity.get("avatar")),
            )
        )
    default = payload.get("defaultId")
    return AgentRoster(agents=tuple(out), default_id=default if is_agent_id(default) else None)
