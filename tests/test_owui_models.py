"""Model selection for the Pipe (``owc.owui.models``): the real ``models.list`` read, the manifold list, the
sub id round trip, and ``sessions.patch``.

The fixtures are the real Gateway 2026.9.6's answers, captured from the realgw tier's install (offline config of
``tests/realgw/gateway.py`` plus the models ``z-ai/glm-5.2`` and ``qwen3:8b`` under the ``fake`` provider; once
plain, once with the allowlist ``agents.defaults.models = {"fake/fake-model": {"alias": "fast"},
"fake/z-ai/glm-5.2": {}}``). ``path`` values are shortened.
"""

from __future__ import annotations

import ast
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owc.owui import models as mo
from owc.owui.models import GatewayModel

ROOT = Path(__file__).resolve().parents[1]

#: ``models.list {}``, plain config (measured).
REAL_LIST: dict[str, Any] = {
    "models": [
        {
            "id": "fake-model",
            "name": "Fake Model",
            "provider": "fake",
            "contextWindow": 128000,
            "reasoning": False,
            "tags": ["default"],
            "thinkingLevels": [{"id": "off", "label": "off"}],
            "thinkingDefault": "off",
            "available": True,
        },
        {
            "id": "qwen3:8b",
            "name": "Qwen3 8B",
            "provider": "fake",
            "contextWindow": 128000,
            "reasoning": False,
            "thinkingLevels": [{"id": "off", "label": "off"}],
            "thinkingDefault": "off",
            "available": True,
        },
        {
            "id": "z-ai/glm-5.2",
            "name": "GLM 5.2",
            "provider": "fake",
            "contextWindow": 128000,
            "reasoning": True,
            "thinkingLevels": [
                {"id": "off", "label": "off"},
                {"id": "minimal", "label": "minimal"},
                {"id": "low", "label": "low"},
                {"id": "medium", "label": "medium"},
                {"id": "high", "label": "high"},
            ],
            "thinkingDefault": "medium",
            "available": True,
        },
    ]
}

#: ``models.list {}`` with the allowlist (measured): only allowlisted models, tagged ``configured``, the alias.
REAL_LIST_ALLOWLIST: dict[str, Any] = {
    "models": [
        {
            "id": "fake-model",
            "name": "Fake Model",
            "provider": "fake",
            "alias": "fast",
            "contextWindow": 128000,
            "reasoning": False,
            "tags": ["default", "configured"],
            "thinkingLevels": [{"id": "off", "label": "off"}],
            "thinkingDefault": "off",
            "available": True,
        },
        {
            "id": "z-ai/glm-5.2",
            "name": "GLM 5.2",
            "provider": "fake",
            "contextWindow": 128000,
            "reasoning": True,
            "tags": ["configured"],
            "thinkingLevels": [{"id": "off", "label": "off"}, {"id": "medium", "label": "medium"}],
            "thinkingDefault": "medium",
            "available": True,
        },
    ]
}

#: ``sessions.patch {key, model: "fake/z-ai/glm-5.2"}`` on a key with no session yet (measured).
REAL_PATCH_REPLY: dict[str, Any] = {
    "ok": True,
    "path": "/tmp/owc-realgw-r5srugng/state/agents/main/agent/openclaw-agent.sqlite",
    "key": "agent:main:owc-capture-0fedb551-b206-4b6e-8f07-336130a4f346",
    "entry": {
        "sessionId": "442399a1-1e7d-4aa5-958e-3f40989ccb60",
        "lifecycleRevision": "95388f5d-d5ff-4fb4-af93-ce63bece78cf",
        "updatedAt": 1796065294312,
        "createdVia": "operator",
        "createdAt": 1796065294309,
        "providerOverride": "fake",
        "modelOverride": "z-ai/glm-5.2",
        "modelOverrideSource": "user",
        "modelOverrideRouteResolution": "resolved",
    },
    "resolved": {
        "modelProvider": "fake",
        "model": "z-ai/glm-5.2",
        "agentRuntime": {"id": "openclaw", "source": "implicit"},
        "runtimeSelectionLocked": False,
        "thinkingLevel": "medium",
        "thinkingLevels": [{"id": "off", "label": "off"}, {"id": "medium", "label": "medium"}],
    },
}

#: ``sessions.patch {key, model: null}`` afterwards (measured): back to the agent's default.
REAL_PATCH_NULL_REPLY: dict[str, Any] = {
    "ok": True,
    "path": "/tmp/owc-realgw-r5srugng/state/agents/main/agent/openclaw-agent.sqlite",
    "key": "agent:main:owc-capture-0fedb551-b206-4b6e-8f07-336130a4f346",
    "entry": {
        "sessionId": "442399a1-1e7d-4aa5-958e-3f40989ccb60",
        "lifecycleRevision": "95388f5d-d5ff-4fb4-af93-ce63bece78cf",
        "updatedAt": 1796065296581,
        "createdVia": "operator",
        "createdAt": 1796065294309,
        "modelOverrideSource": "default",
        "delivery": {"kind": "none"},
    },
    "resolved": {
        "modelProvider": "fake",
        "model": "fake-model",
        "agentRuntime": {"id": "openclaw", "source": "implicit"},
        "runtimeSelectionLocked": False,
    },
}


def gm(provider: str, model_id: str, name: str | None = None, **kw: Any) -> GatewayModel:
    return GatewayModel(provider=provider, id=model_id, name=name or model_id, **kw)


def many(n: int) -> list[GatewayModel]:
    return [gm("p", f"m{i:03d}") for i in range(n)]


# ---------------------------------------------------------------------------------------------- read_models


def test_real_models_list_is_read() -> None:
    models = mo.read_models(REAL_LIST)
    assert [m.key for m in models] == ["fake/fake-model", "fake/qwen3:8b", "fake/z-ai/glm-5.2"]
    assert [m.name for m in models] == ["Fake Model", "Qwen3 8B", "GLM 5.2"]
    assert [m.is_default for m in models] == [True, False, False]
    assert all(m.available is True and m.alias is None for m in models)
    assert models[2] == GatewayModel(provider="fake", id="z-ai/glm-5.2", name="GLM 5.2", available=True)


def test_real_allowlisted_models_list_is_read() -> None:
    first, second = mo.read_models(REAL_LIST_ALLOWLIST)
    assert (first.key, first.alias, first.tags, first.is_default) == (
        "fake/fake-model",
        "fast",
        ("default", "configured"),
        True,
    )
    assert (second.key, second.tags) == ("fake/z-ai/glm-5.2", ("configured",))


@pytest.mark.parametrize(
    ("provider", "model_id", "key"),
    [
        ("fake", "fake-model", "fake/fake-model"),
        ("openrouter", "z-ai/glm-5.2", "openrouter/z-ai/glm-5.2"),
        ("openrouter", "openrouter/auto", "openrouter/auto"),  # the id already carries its provider
        ("OpenRouter", "openrouter/auto", "openrouter/auto"),
        ("ollama", "qwen3:8b", "ollama/qwen3:8b"),
        (" fake ", " m ", "fake/m"),
        ("", "m", "m"),
        ("p", "", "p"),
    ],
)
def test_model_key_is_the_gateways(provider: str, model_id: str, key: str) -> None:
    assert mo.model_key(provider, model_id) == key


@pytest.mark.parametrize(
    "payload",
    [None, [], "models", 5, {}, {"models": None}, {"models": {}}, {"models": "x"}, {"model": REAL_LIST["models"]}],
)
def test_a_payload_without_a_models_list_reads_as_none(payload: Any) -> None:
    assert mo.read_models(payload) == []


def test_hostile_entries_are_skipped_and_the_valid_ones_kept() -> None:
    good = {"id": "ok", "name": "OK", "provider": "p"}
    entries: list[Any] = [
        None,
        "fake/fake-model",
        ["id", "x"],
        {"name": "no id", "provider": "p"},
        {"id": "no-provider", "name": "x"},
        {"id": "", "name": "empty id", "provider": "p"},
        {"id": "   ", "name": "blank id", "provider": "p"},
        {"id": 5, "name": "int id", "provider": "p"},
        {"id": "x", "name": "list provider", "provider": ["p"]},
        {"id": "bad\nid", "name": "control char", "provider": "p"},
        {"id": "x" * (mo.MAX_KEY_CHARS + 1), "name": "too long", "provider": "p"},
        good,
        {**good, "name": "duplicate key"},
    ]
    assert mo.read_models({"models": entries}) == [GatewayModel(provider="p", id="ok", name="OK")]


def test_a_name_falls_back_and_is_cleaned() -> None:
    payload = {
        "models": [
            {"id": "a", "provider": "p", "alias": "Alias A"},  # no name: the alias
            {"id": "b", "provider": "p", "name": 7},  # no usable name, no alias: the id
            {"id": "c", "provider": "p", "name": "  Two\nlines\u202e\tand\u200b  spaces "},
            {"id": "d", "provider": "p", "name": "N" * 500},
            {"id": "e", "provider": "p", "name": "\x00\x01"},
        ]
    }
    a, b, c, d, e = mo.read_models(payload)
    assert (a.name, b.name, c.name, e.name) == ("Alias A", "b", "Two lines and spaces", "e")
    assert len(d.name) == mo.MAX_NAME_CHARS and d.name.endswith("…")


def test_odd_tags_and_availability_are_tolerated() -> None:
    payload = {
        "models": [
            {"id": "a", "name": "A", "provider": "p", "tags": "default", "available": "yes"},
            {"id": "b", "name": "B", "provider": "p", "tags": ["default", 3, None, "", "x"], "available": False},
            {"id": "c", "name": "C", "provider": "p", "tags": [f"t{i}" for i in range(100)]},
        ]
    }
    a, b, c = mo.read_models(payload)
    assert (a.tags, a.available, a.is_default) == ((), None, False)
    assert (b.tags, b.available, b.is_default) == (("default", "x"), False, True)
    assert len(c.tags) == mo.MAX_TAGS


def test_a_huge_list_is_read_only_up_to_the_bound() -> None:
    payload = {"models": [{"id": f"m{i}", "name": "M", "provider": "p"} for i in range(mo.MAX_READ + 500)]}
    assert len(mo.read_models(payload)) == mo.MAX_READ


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)
ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "id": JSON | st.text(max_size=30),
        "name": JSON | st.text(max_size=30),
        "provider": JSON | st.text(max_size=10),
        "alias": JSON,
        "tags": JSON,
        "available": JSON,
    },
)


@given(st.one_of(JSON, st.fixed_dictionaries({"models": st.lists(ENTRY | JSON, max_size=8)})))
def test_read_models_never_raises(payload: Any) -> None:
    models = mo.read_models(payload)
    assert len({m.key for m in models}) == len(models)
    for model in models:
        assert model.provider and model.id and model.name
        entries = mo.manifold_entries("main", models, whitelist="", cap=30, reached=True)
        assert all(mo.model_for_entry(e["id"])[1] in (None, *(m.key for m in models)) for e in entries)


# ---------------------------------------------------------------------------------------------- sub ids


@pytest.mark.parametrize(
    ("key", "sub_id"),
    [
        ("fake/fake-model", "main~fake/fake-model"),
        ("openrouter/z-ai/glm-5.2", "main~openrouter/z-ai/glm-5.2"),
        ("ollama/qwen3:8b", "main~ollama/qwen3:8b"),
        ("ollama/llama3.1:8b-instruct-q4_K_M", "main~ollama/llama3.1:8b-instruct-q4_K_M"),
        ("anthropic/claude-3.5-sonnet:beta", "main~anthropic/claude-3.5-sonnet:beta"),
        ("workers-ai/@cf/meta/llama", "main~workers-ai/~40cf/meta/llama"),
        ("p/a,b", "main~p/a~2Cb"),  # a comma would split Open WebUI's ?models=a,b
        ("p/a~b", "main~p/a~7Eb"),
        ("p/100% sure?#x&y", "main~p/100~25~20sure~3F~23x~26y"),
        ("p/modèle", "main~p/mod~C3~A8le"),
        ("p/模型", "main~p/~E6~A8~A1~E5~9E~8B"),
    ],
)
def test_a_model_key_round_trips_through_its_sub_id(key: str, sub_id: str) -> None:
    assert mo.entry_id("main", key) == sub_id
    assert mo.model_for_entry(sub_id) == ("main", key)
    assert mo.model_for_entry(mo.entry_of_model_id(f"openclaw.{sub_id}")) == ("main", key)


SAFE_IN_IDS = set(string.ascii_letters + string.digits + "._-/:~")


@given(
    st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}", fullmatch=True),
    st.text(min_size=1, max_size=40).filter(lambda t: "\x00" not in t),
)
def test_any_key_round_trips_and_its_sub_id_is_url_safe(agent: str, key: str) -> None:
    sub_id = mo.entry_id(agent, key)
    assert set(sub_id) <= SAFE_IN_IDS and "," not in sub_id
    assert mo.model_for_entry(sub_id) == (agent, key)
    assert mo.entry_of_model_id(f"openclaw.{sub_id}") == sub_id


@given(st.text(max_size=30))
def test_model_for_entry_never_raises(sub_id: str) -> None:
    agent, key = mo.model_for_entry(sub_id)
    if key is not None:
        assert mo.entry_id(agent, key) == sub_id  # only canonical sub ids map to a model


@pytest.mark.parametrize(
    ("sub_id", "expected"),
    [
        ("main", ("main", None)),
        ("ops-bot", ("ops-bot", None)),
        ("main~", ("main", None)),
        ("main~p/a~2", ("main", None)),  # a cut escape
        ("main~p/a~zz", ("main", None)),
        ("main~p/a~2c", ("main", None)),  # lowercase hex: not what entry_id writes
        ("main~p/a~41", ("main", None)),  # an escaped safe char: not canonical either
        ("main~p/~FF", ("main", None)),  # not UTF-8
        ("main~p/a b", ("main", None)),  # a character entry_id escapes
        ("main~~7E", ("main", "~")),
    ],
)
def test_a_sub_id_owc_never_lists_maps_to_the_default(sub_id: str, expected: tuple[str, str | None]) -> None:
    assert mo.model_for_entry(sub_id) == expected


def test_odd_inputs_to_the_id_helpers() -> None:
    assert mo.model_for_entry(None) == ("", None)  # type: ignore[arg-type]
    assert mo.entry_of_model_id("openclaw.main") == "main"
    assert mo.entry_of_model_id("main") == "main"
    assert mo.entry_of_model_id(None) == ""  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- manifold


def test_default_first_then_every_gateway_model() -> None:
    entries = mo.manifold_entries("main", mo.read_models(REAL_LIST), whitelist="", cap=30, reached=True)
    assert entries == [
        {"id": "main", "name": "OpenClaw"},
        {"id": "main~fake/fake-model", "name": "Fake Model (fake) · OpenClaw"},
        {"id": "main~fake/qwen3:8b", "name": "Qwen3 8B (fake) · OpenClaw"},
        {"id": "main~fake/z-ai/glm-5.2", "name": "GLM 5.2 (fake) · OpenClaw"},
    ]
    assert [mo.model_for_entry(e["id"]) for e in entries] == [
        ("main", None),
        ("main", "fake/fake-model"),
        ("main", "fake/qwen3:8b"),
        ("main", "fake/z-ai/glm-5.2"),
    ]


def test_the_default_entry_keeps_the_agent_id() -> None:
    entries = mo.manifold_entries("ops-bot", many(2), whitelist=None, cap=None, reached=True)
    assert entries[0] == {"id": "ops-bot", "name": "OpenClaw"}
    assert [e["id"] for e in entries[1:]] == ["ops-bot~p/m000", "ops-bot~p/m001"]


@pytest.mark.parametrize(
    ("cap", "listed"),
    [(2, 2), (30, 30), (1, 1), (0, 1), (-5, 1), (1000, 100), (None, 30), ("5", 30), (True, 30), (2.5, 30)],
)
def test_the_cap_without_a_whitelist(cap: Any, listed: int) -> None:
    entries = mo.manifold_entries("main", many(150), whitelist="", cap=cap, reached=True)
    assert len(entries) == 1 + listed
    assert [e["id"] for e in entries[1:]] == [f"main~p/m{i:03d}" for i in range(listed)]


def test_the_whitelist_names_models_by_key_id_name_or_alias_case_insensitively() -> None:
    models = [
        gm("openai", "gpt-5.5", "GPT-5.5"),
        gm("anthropic", "claude-opus-4-8", "Claude Opus 4.8", alias="opus"),
        gm("openrouter", "z-ai/glm-5.2", "GLM 5.2"),
        gm("ollama", "qwen3:8b", "Qwen3 8B"),
        gm("azure", "gpt-5.5", "GPT-5.5 (Azure)"),
    ]
    whitelist = " OPUS , openrouter/Z-AI/glm-5.2,, qwen3 8b ,nothing-like-it, opus "
    entries = mo.manifold_entries("main", models, whitelist=whitelist, cap=1, reached=True)
    assert [mo.model_for_entry(e["id"])[1] for e in entries] == [
        None,
        "anthropic/claude-opus-4-8",  # the whitelist's order, not the Gateway's
        "openrouter/z-ai/glm-5.2",
        "ollama/qwen3:8b",  # by name; and the cap does not apply to a whitelist
    ]
    assert mo.whitelist_misses(models, whitelist) == ("nothing-like-it",)
    # A bare id names it under every provider; a list of items works as the valve's text does.
    bare = mo.manifold_entries("main", models, whitelist=["gpt-5.5"], cap=30, reached=True)
    assert [e["name"] for e in bare[1:]] == ["GPT-5.5 (openai) · OpenClaw", "GPT-5.5 (Azure) (azure) · OpenClaw"]


def test_a_whitelist_of_only_commas_is_no_whitelist() -> None:
    assert mo.parse_whitelist(" , ,, ") == ()
    assert len(mo.manifold_entries("main", many(40), whitelist=" , ,", cap=3, reached=True)) == 4


def test_a_whitelist_that_names_nothing_leaves_the_default() -> None:
    entries = mo.manifold_entries("main", many(5), whitelist="gone/model", cap=30, reached=True)
    assert entries == [{"id": "main", "name": "OpenClaw"}]


def test_even_a_whitelist_lists_at_most_the_ceiling() -> None:
    models = [gm(f"p{i:03d}", "same") for i in range(150)]
    assert len(mo.manifold_entries("main", models, whitelist="same", cap=5, reached=True)) == 1 + mo.CAP_MAX


def test_an_unavailable_model_stays_listed_and_says_so() -> None:
    models = [gm("p", "a", "A", available=False), gm("p", "b", "B", available=None)]
    names = [e["name"] for e in mo.manifold_entries("main", models, whitelist="", cap=30, reached=True)]
    assert names == ["OpenClaw", "A (p) · OpenClaw (unavailable)", "B (p) · OpenClaw"]


def test_not_reached_lists_the_default_with_an_honest_label() -> None:
    assert mo.manifold_entries("main", [], whitelist="", cap=30, reached=False) == [
        {"id": "main", "name": "OpenClaw (Gateway not reached)"}
    ]
    # What the caller still knows stays listed (chats pinned to it keep their model id), labelled too.
    kept = mo.manifold_entries("main", mo.read_models(REAL_LIST)[:1], whitelist="", cap=30, reached=False)
    assert kept == [
        {"id": "main", "name": "OpenClaw (Gateway not reached)"},
        {"id": "main~fake/fake-model", "name": "Fake Model (fake) · OpenClaw (Gateway not reached)"},
    ]


def test_an_agent_id_with_the_separator_gets_the_default_only() -> None:
    assert mo.manifold_entries("odd~agent", many(3), whitelist="", cap=30, reached=True) == [
        {"id": "odd~agent", "name": "OpenClaw"}
    ]


# ---------------------------------------------------------------------------------------------- sessions.patch


KEY = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"


def test_session_patch_params_pin_and_unpin() -> None:
    assert mo.session_patch_params(KEY, "openrouter/z-ai/glm-5.2") == {"key": KEY, "model": "openrouter/z-ai/glm-5.2"}
    assert mo.session_patch_params(KEY, " ollama/qwen3:8b ") == {"key": KEY, "model": "ollama/qwen3:8b"}
    assert mo.session_patch_params(KEY, None) == {"key": KEY, "model": None}
    # The round trip from a picked entry to the patch.
    agent, model = mo.model_for_entry(mo.entry_of_model_id("openclaw.main~ollama/qwen3:8b"))
    assert agent == "main"
    assert mo.session_patch_params(KEY, model) == {"key": KEY, "model": "ollama/qwen3:8b"}


@pytest.mark.parametrize(("key", "model"), [(KEY, ""), (KEY, "   "), (KEY, 5), ("", "p/m"), (" ", None), (None, None)])
def test_session_patch_params_refuse_what_the_gateway_refuses(key: Any, model: Any) -> None:
    with pytest.raises(ValueError):
        mo.session_patch_params(key, model)


def test_patched_model_reads_the_real_reply() -> None:
    assert mo.patched_model(REAL_PATCH_REPLY) == "fake/z-ai/glm-5.2"
    assert mo.patched_model(REAL_PATCH_NULL_REPLY) == "fake/fake-model"


@pytest.mark.parametrize(
    "payload",
    [None, [], {}, {"resolved": None}, {"resolved": {"model": "m"}}, {"resolved": {"modelProvider": 1, "model": "m"}}],
)
def test_patched_model_of_an_odd_reply_is_none(payload: Any) -> None:
    assert mo.patched_model(payload) is None


# ---------------------------------------------------------------------------------------------- purity


def test_the_module_is_pure() -> None:
    tree = ast.parse((ROOT / "owc/owui/models.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "string", "unicodedata", "collections.abc", "typing", "attrs"}
    code = "import sys, owc.owui.models\nprint([m for m in ('trio', 'asyncio', 'open_webui') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
