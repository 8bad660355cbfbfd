"""The simulator's agents: ``agents.list`` as the real Gateway 2026.9.6 answers it (issue 31).

Measured (``docs/measured/agents-2026.9.6.md``): params a closed ``{}``; scope ``operator.read``; the answer
``{defaultId, ownership, selectionRequired, mainKey, scope, agents: [...]}`` with the default agent first and the
others sorted by id; an agent's ``name`` is its configured name, else ``identity.name``, absent when neither is set;
``identity`` carries ``name``, ``theme``, ``emoji``, ``avatar`` and the resolved ``avatarUrl`` (only an ``http(s)``
or a ``data:image`` avatar gets one here; the real one also reads a workspace file into a ``data:`` URL). The fields
owc does not read (``workspace``, ``agentRuntime``, ``thinkingLevels``, ``model``...) are given in their measured
shape so a client that reads them sees what the real one sends.

The roster is configuration, as on the real Gateway (``agents.list`` in ``openclaw.json``): ``Agents.configured`` holds
the entries as that file would (``{"id", "name"?, "default"?, "identity"?}``); without one the Gateway has its one
``main`` agent. ``TWO_AGENTS`` is the second-agent setup the tests and the demo use.
"""

from __future__ import annotations

import copy
from typing import Any

from owc.sim.delivery import SimConn
from owc.sim.refusals import InvalidParams

#: A 1x1 PNG as a ``data:`` URL: an avatar that needs no network.
TEA_PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

#: ``main`` and a second agent with a name, an emoji and an avatar (the measured probe's ``matcha``).
TWO_AGENTS: tuple[dict[str, Any], ...] = (
    {"id": "main", "default": True},
    {"id": "matcha", "name": "Matcha", "identity": {"name": "Matcha", "emoji": "\U0001f375", "avatar": TEA_PNG}},
)


def _avatar_url(avatar: Any) -> str | None:
    if not isinstance(avatar, str):
        return None
    return avatar if avatar.startswith(("http://", "https://", "data:image/")) else None


class Agents:
    """The configured agents and the ``agents.list`` handler."""

    def __init__(self, configured: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()) -> None:
        #: The ``agents.list`` entries of the Gateway's config; tests may replace them (``sim.rpc.agents.configured``).
        self.configured: list[dict[str, Any]] = copy.deepcopy(list(configured))

    @property
    def default_id(self) -> str:
        """The entry marked ``default``, else the first, else ``main`` (``resolveGatewayAgentSelectionState``)."""
        marked = [e["id"] for e in self.configured if e.get("default")]
        return (marked or [e["id"] for e in self.configured] or ["main"])[0]

    def ids(self) -> list[str]:
        """The agent ids in the Gateway's order: the default first, the others sorted."""
        others = sorted({e["id"] for e in self.configured} - {self.default_id})
        return [self.default_id, *others]

    def exists(self, agent_id: str) -> bool:
        return agent_id in self.ids()

    def _entry(self, agent_id: str) -> dict[str, Any]:
        config = next((e for e in self.configured if e.get("id") == agent_id), {"id": agent_id})
        identity = config.get("identity") if isinstance(config.get("identity"), dict) else None
        name = config.get("name") or (identity or {}).get("name")
        agent: dict[str, Any] = {"id": agent_id}
        if name:
            agent["name"] = name
        if identity is not None:
            shown = {k: identity[k] for k in ("name", "theme", "emoji", "avatar") if identity.get(k)}
            url = _avatar_url(identity.get("avatar"))
            if url is not None:
                shown["avatarUrl"] = url
            agent["identity"] = shown
        workspace = "/sim/workspace" if agent_id == self.default_id else f"/sim/workspace/{agent_id}"
        agent.update(
            {
                "workspace": workspace,
                "workspaceGit": False,
                "agentRuntime": {
                    "id": "auto",
                    "cloudPlacementSupported": False,
                    "devicePlacementSupported": False,
                    "source": "implicit",
                },
                "thinkingLevels": [{"id": "off", "label": "off"}],
                "thinkingOptions": ["off"],
                "thinkingDefault": "off",
                "model": {"primary": "fake/fake-model"},
                "defaultPermissionMode": "full",
            }
        )
        return agent

    def agents_list(self, conn: SimConn, params: dict[str, Any]) -> dict[str, Any]:
        """``agents.list {}``; any param is refused as the real one refuses it."""
        if params:
            raise InvalidParams(f"at root: unexpected property '{sorted(params)[0]}'")
        return {
            "defaultId": self.default_id,
            "ownership": "legacy",
            "selectionRequired": False,
            "mainKey": "main",
            "scope": "per-sender",
            "agents": [self._entry(agent_id) for agent_id in self.ids()],
        }
