"""The simulator's ``models.list`` and ``sessions.patch``, against the real Gateway 2026.9.6's measured answers
(captured as described in ``test_owui_models.py``, whose fixtures hold the whole answers), and owc's model
selection end to end over them."""

from __future__ import annotations

from typing import Any

import trio

from owc.owui import models as mo
from owc.sim import model as m
from owc.sim import open_simulator

from conftest import TOKEN
from rawclient import raw_client

KEY = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"
#: A real ``models.list`` row (measured, plain config) and the real alias type (allowlist config).
REAL_ROW: dict[str, Any] = {
    "id": "z-ai/glm-5.2",
    "name": "GLM 5.2",
    "provider": "fake",
    "contextWindow": 128000,
    "reasoning": True,
    "tags": ["configured"],
    "thinkingLevels": [{"id": "off", "label": "off"}, {"id": "medium", "label": "medium"}],
    "thinkingDefault": "medium",
    "available": True,
}
REAL_TYPES = {**{k: type(v) for k, v in REAL_ROW.items()}, "alias": str}
#: The keys of the real ``sessions.patch`` replies (measured): a model pinned, then ``model: null``.
REAL_PATCH_KEYS = {"ok", "path", "key", "entry", "resolved"}
REAL_ENTRY_KEYS = {
    "sessionId", "lifecycleRevision", "updatedAt", "createdVia", "createdAt", "providerOverride", "modelOverride",
    "modelOverrideSource", "modelOverrideRouteResolution", "delivery", "liveModelSwitchPending",
}  # fmt: skip
REAL_RESOLVED_KEYS = {
    "modelProvider", "model", "agentRuntime", "runtimeSelectionLocked", "thinkingLevel", "thinkingLevels",
}  # fmt: skip
REAL_NULL_RESOLVED_KEYS = {"modelProvider", "model", "agentRuntime", "runtimeSelectionLocked"}
#: The fields ``ModelChoiceSchema`` allows (a closed object, ``dist/src-BRUl7oDv.mjs:302-313``).
MODEL_CHOICE_FIELDS = {
    "id", "name", "provider", "alias", "tags", "available", "manualSelectionAllowed", "unavailableReason",
    "unavailableUntil", "contextWindow", "contextTokens", "local", "contextWindows", "contextWindowDefault",
    "reasoning", "thinkingLevels", "thinkingDefault", "effectiveFastMode", "supportsFastMode", "supportsTools",
    "input", "agentRuntime", "apiKeySupported", "runtimeChoices",
}  # fmt: skip


def error(response: Any) -> dict[str, Any]:
    assert not response.ok
    return response.error.to_json()


async def test_models_list_answers_the_real_shape() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        response = await client.request("models.list", {})
        assert response.ok and set(response.payload) == {"models"}
        rows = response.payload["models"]
        assert all(set(row) <= MODEL_CHOICE_FIELDS for row in rows)
        # Every field a real row has, a simulated one has too, of the same type.
        assert all(set(REAL_ROW) <= set(row) for row in rows)
        assert all(type(v) is REAL_TYPES[k] for row in rows for k, v in row.items())
        models = mo.read_models(response.payload)
        assert [x.key for x in models] == ["sim/sim-model", "ollama/qwen3:8b", "openrouter/z-ai/glm-5.2"]
        assert [x.is_default for x in models] == [True, False, False]
        assert models[2].alias == "glm"
        assert sim.requests["models.list"] == 1


async def test_models_list_params_as_the_real_gateway_checks_them() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        # Measured: ``models.list {"bogus": 1}``.
        assert error(await client.request("models.list", {"bogus": 1})) == {
            "code": "INVALID_REQUEST",
            "message": "invalid models.list params: at root: unexpected property 'bogus'",
        }
        assert error(await client.request("models.list", {"view": "mine"}))["code"] == "INVALID_REQUEST"
        # Measured: ``view: "configured"`` adds ``defaultModels``.
        configured = await client.request("models.list", {"view": "configured"})
        assert configured.payload["defaultModels"] == {"automaticUtilityModel": None}
        only = await client.request("models.list", {"provider": "ollama"})
        assert [row["id"] for row in only.payload["models"]] == ["qwen3:8b"]


async def test_the_catalog_is_configurable() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        sim.rpc.models = [dict(REAL_ROW)]
        response = await client.request("models.list", {})
        assert response.payload == {"models": [REAL_ROW]}
        patched = await client.request("sessions.patch", {"key": KEY, "model": "fake/z-ai/glm-5.2"})
        assert patched.ok and mo.patched_model(patched.payload) == "fake/z-ai/glm-5.2"


async def test_sessions_patch_pins_and_unpins_a_model_like_the_real_one() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        before = await client.request("sessions.describe", {"key": KEY})
        assert before.payload == {"session": None}
        pinned = await client.request("sessions.patch", mo.session_patch_params(KEY, "openrouter/z-ai/glm-5.2"))
        assert pinned.ok
        assert set(pinned.payload) == REAL_PATCH_KEYS
        assert set(pinned.payload["resolved"]) == REAL_RESOLVED_KEYS
        assert set(pinned.payload["entry"]) <= REAL_ENTRY_KEYS
        assert pinned.payload["entry"]["modelOverride"] == "z-ai/glm-5.2"
        assert pinned.payload["resolved"]["thinkingLevel"] == "medium"
        assert mo.patched_model(pinned.payload) == "openrouter/z-ai/glm-5.2"
        # The session now exists and its row names the model, as sessions.describe said on the real one.
        row = (await client.request("sessions.describe", {"key": KEY})).payload["session"]
        assert (row["modelProvider"], row["model"]) == ("openrouter", "z-ai/glm-5.2")
        assert sim.sessions[KEY].model_override == ("openrouter", "z-ai/glm-5.2")

        unpinned = await client.request("sessions.patch", mo.session_patch_params(KEY, None))
        assert unpinned.ok
        assert set(unpinned.payload["resolved"]) == REAL_NULL_RESOLVED_KEYS
        assert unpinned.payload["entry"]["modelOverrideSource"] == "default"
        assert "modelOverride" not in unpinned.payload["entry"]
        assert mo.patched_model(unpinned.payload) == f"{m.PROVIDER}/{m.MODEL}"
        row = (await client.request("sessions.describe", {"key": KEY})).payload["session"]
        assert (row["modelProvider"], row["model"]) == (m.PROVIDER, m.MODEL)


async def test_sessions_patch_resolves_bare_ids_and_aliases() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        for raw, key in [
            ("qwen3:8b", "ollama/qwen3:8b"),
            ("GLM", "openrouter/z-ai/glm-5.2"),
            ("sim-model", "sim/sim-model"),
            ("ollama/qwen3:8b", "ollama/qwen3:8b"),
        ]:
            response = await client.request("sessions.patch", {"key": KEY, "model": raw})
            assert mo.patched_model(response.payload) == key, raw


async def test_sessions_patch_refusals_match_the_real_ones() -> None:
    """The messages the real Gateway gave (measured; ``model not allowed`` with an allowlist configured, which
    the simulator's catalog stands for)."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        cases = [
            ({"key": KEY, "model": "nope/bogus"}, "model not allowed: nope/bogus"),
            ({"key": KEY, "model": "ollama/qwen3:14b"}, "model not allowed: ollama/qwen3:14b"),
            (
                {"key": KEY, "model": ""},
                "invalid sessions.patch params: at /model: must not have fewer than 1 characters; at /model: must be"
                " null; at /model: must match a schema in anyOf",
            ),
            (
                {"key": KEY, "model": 5},
                "invalid sessions.patch params: at /model: must be string; at /model: must be null; at /model: must"
                " match a schema in anyOf",
            ),
            ({"model": "sim/sim-model"}, "invalid sessions.patch params: must have required property 'key'"),
        ]
        for params, message in cases:
            assert error(await client.request("sessions.patch", params)) == {
                "code": "INVALID_REQUEST",
                "message": message,
            }, params
        assert KEY not in sim.sessions  # nothing was created by a refused patch


async def test_scopes_as_the_real_gateway_requires_them() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        (conn,) = sim.conns.values()
        conn.scopes = frozenset({"operator.read", "operator.write"})
        # A field outside the write-scope set needs admin (``resolveSessionsPatchRequiredScope``).
        assert error(await client.request("sessions.patch", {"key": KEY, "execHost": "gateway"})) == {
            "code": "FORBIDDEN",
            "message": "missing scope: operator.admin",
            "details": {
                "code": "MISSING_SCOPE",
                "missingScope": "operator.admin",
                "requiredScopes": ["operator.admin"],
            },
        }
        assert (await client.request("sessions.patch", {"key": KEY, "model": None})).ok
        conn.scopes = frozenset({"operator.read"})
        assert (await client.request("models.list", {})).ok
        assert error(await client.request("sessions.patch", {"key": KEY, "model": None}))["details"] == {
            "code": "MISSING_SCOPE",
            "missingScope": "operator.write",
            "requiredScopes": ["operator.write"],
        }


async def test_a_patch_pushes_sessions_changed_after_its_reply() -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        await client.request("sessions.subscribe", {})
        req = await client.send("sessions.patch", {"key": KEY, "model": "qwen3:8b"})
        with trio.fail_after(5):
            await client.response(req)
            event = await client.event("sessions.changed")
        assert event.payload["reason"] == "patch" and event.payload["sessionKey"] == KEY
        assert (event.payload["modelProvider"], event.payload["model"]) == ("ollama", "qwen3:8b")
        # The reply came before the push.
        kinds = [f.get("type") for f in client.frames[-2:]]
        assert kinds == ["res", "event"]


async def test_owc_picks_a_model_end_to_end() -> None:
    """The list the Pipe would show from the simulator, an entry picked, mapped back, and pinned."""
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        listed = mo.read_models((await client.request("models.list", {})).payload)
        entries = mo.manifold_entries("main", listed, whitelist="", cap=30, reached=True)
        assert [e["name"] for e in entries] == [
            "OpenClaw",
            "Sim Model (sim) · OpenClaw",
            "Qwen3 8B (ollama) · OpenClaw",
            "GLM 5.2 (openrouter) · OpenClaw",
        ]
        for entry in entries:
            agent, model = mo.model_for_entry(mo.entry_of_model_id(f"openclaw.{entry['id']}"))
            assert agent == "main"
            response = await client.request("sessions.patch", mo.session_patch_params(KEY, model))
            assert response.ok
            assert mo.patched_model(response.payload) == (model or f"{m.PROVIDER}/{m.MODEL}")
        assert sim.requests["sessions.patch"] == len(entries)
