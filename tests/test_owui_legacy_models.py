"""The default model and the old model ids (issue 28; inventory B1, B4, B5, B6): what a turn's Open WebUI model id
means (``owc.owui.models.resolve``), what ``pipes()`` lists under the old Pipe's Function id ``openclaw_gateway``,
and the ``DEFAULT_MODEL`` valve's select as Open WebUI 0.12.4 builds and renders it.

Open WebUI 0.12.4 facts these tests stand on (read in its wheel):

* ``utils/plugin.py`` ``resolve_valves_schema_options``: for a Valves field whose ``json_schema_extra`` has
  ``input.options``, a list is used as it is; a string names an attribute of the Valves class, called (with
  ``__user__`` / ``user`` only when its signature takes them); a result that is not a list, or a raise, leaves the
  string in the schema. The valves spec endpoints (``routers/functions.py``) return ``Valves.schema()`` so resolved.
* ``Valves.svelte``: a property is a select when it has no ``enum``, is not a boolean, has ``type: "string"`` and
  ``input.type == "select"`` with truthy ``input.options``; ``NativeSelect.svelte`` shows each option as a string or
  ``{value, label}``. A string there would be iterated letter by letter.
* ``utils/plugin.py`` ``load_function_module_by_id``: the Function file runs in a module named
  ``function_<id>_<uuid4 hex>``.
* ``main.py`` ``chat_completion``: a model id Open WebUI does not list is "Model not found".
"""

from __future__ import annotations

import importlib.util
import inspect
import types
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owc.owui import models as mo
from owc.owui.install import function_source
from owc.owui.models import GatewayModel, Resolved

OLD = mo.OLD_FUNCTION_ID
DEFAULT_KEYS = {"chatgpt": "openai/gpt-5.5", "opus": "anthropic/claude-opus-4-8",
                "sonnet": "anthropic/claude-sonnet-5", "glm": "openrouter/z-ai/glm-5.2"}  # fmt: skip
CUSTOM = {"chatgpt": "openai/gpt-6", "opus": "anthropic/claude-opus-5", "sonnet": "x/y", "glm": "z-ai/glm-6"}


def gm(provider: str, model_id: str, name: str | None = None, **kw: Any) -> GatewayModel:
    return GatewayModel(provider=provider, id=model_id, name=name or model_id, **kw)


CATALOG = [
    gm("fake", "fake-model", "Fake Model", tags=("default",)),
    gm("ollama", "qwen3:8b", "Qwen3 8B"),
    gm("openrouter", "z-ai/glm-5.2", "GLM 5.2"),
    gm("p", "a,b", "Comma"),
]


def load_function(function_id: str | None) -> types.ModuleType:
    """The Pipe's Function file executed as Open WebUI 0.12.4 executes it (a module named
    ``function_<id>_<uuid4 hex>``), or under a plain name (``function_id`` None)."""
    name = f"function_{function_id}_{uuid.uuid4().hex}" if function_id else "openclaw_pipe"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    exec(compile(function_source("openclaw_pipe.py"), "openclaw_pipe.py", "exec"), module.__dict__)
    return module


# ---------------------------------------------------------------------------------------------- resolve

M, OWN, DEF, OLDDEF, PRE, KEY, KEEP = "main", "model", "default", "old default", "preset", "old model", "another agent"

#: (model id, AGENT_ID, DEFAULT_MODEL, preset valves or None, expected): every cell of ``resolve``'s table.
CELLS: list[tuple[Any, str, str, dict[str, str] | None, Resolved]] = [
    # owc's own ids, under its own Function id and another
    ("openclaw.main", M, "", None, Resolved(M, None, reading=DEF)),
    ("openclaw.main", M, "fake/fast", None, Resolved(M, "fake/fast", reading=DEF)),
    ("openclaw.main", M, "  fake/fast  ", None, Resolved(M, "fake/fast", reading=DEF)),
    ("openclaw.main", M, "bad\x00key", None, Resolved(M, None, reading=DEF)),  # not a key: the agent's default
    ("openclaw.main~ollama/qwen3:8b", M, "", None, Resolved(M, "ollama/qwen3:8b", reading=OWN)),
    ("openclaw.main~ollama/qwen3:8b", M, "fake/fast", None, Resolved(M, "ollama/qwen3:8b", reading=OWN)),
    ("openclaw.main~ollama/llama3.1:8b", M, "", None, Resolved(M, "ollama/llama3.1:8b", reading=OWN)),
    ("openclaw.main~p/a~2Cb", M, "", None, Resolved(M, "p/a,b", reading=OWN)),  # an escaped key
    ("openclaw.main~workers-ai/~40cf/x", M, "", None, Resolved(M, "workers-ai/@cf/x", reading=OWN)),
    ("openclaw.main~p/a~2c", M, "", None, Resolved(M, None, reading=DEF)),  # a bad escape: the OpenClaw entry
    ("openclaw.main~p/a~2c", M, "fake/fast", None, Resolved(M, "fake/fast", reading=DEF)),
    ("openclaw.main~", M, "", None, Resolved(M, None, reading=DEF)),
    ("my_owc.main~ollama/qwen3:8b", M, "", None, Resolved(M, "ollama/qwen3:8b", reading=OWN)),
    ("my_owc.main", M, "fake/fast", None, Resolved(M, "fake/fast", reading=DEF)),
    # empty and odd model ids: the OpenClaw entry
    ("", M, "", None, Resolved(M, None, reading=DEF)),
    ("", M, "fake/fast", None, Resolved(M, "fake/fast", reading=DEF)),
    (None, M, "fake/fast", None, Resolved(M, "fake/fast", reading=DEF)),
    ("openclaw.", M, "", None, Resolved(M, None, reading=DEF)),
    ("main", M, "", None, Resolved(M, None, reading=DEF)),  # no dot: the whole is the sub id
    # an entry of another agent (listed before AGENT_ID changed): the session's model is kept
    ("openclaw.ops", M, "fake/fast", None, Resolved("ops", None, keep=True, reading=KEEP)),
    ("openclaw.ops~ollama/qwen3:8b", M, "", None, Resolved("ops", None, keep=True, reading=KEEP)),
    (f"{OLD}.ops~ollama/qwen3:8b", M, "", None, Resolved("ops", None, keep=True, reading=KEEP)),
    # the old Default entry: only under the old Function id
    (f"{OLD}.default", M, "", None, Resolved(M, None, reading=OLDDEF)),
    (f"{OLD}.default", M, "fake/fast", None, Resolved(M, "fake/fast", reading=OLDDEF)),
    ("openclaw.default", M, "", None, Resolved("default", None, keep=True, reading=KEEP)),  # an agent "default"
    ("openclaw.default", "default", "fake/fast", None, Resolved("default", "fake/fast", reading=DEF)),
    (f"{OLD}.default", "default", "", None, Resolved("default", None, reading=OLDDEF)),  # same meaning
    # presets: the valves' keys, else the old defaults; only under the old Function id
    *[(f"{OLD}.{p}", M, "", None, Resolved(M, k, reading=PRE)) for p, k in DEFAULT_KEYS.items()],
    *[(f"{OLD}.{p}", M, "fake/fast", CUSTOM, Resolved(M, k, reading=PRE)) for p, k in CUSTOM.items()],
    (f"{OLD}.chatgpt", M, "", {"chatgpt": ""}, Resolved(M, "openai/gpt-5.5", reading=PRE)),  # empty valve
    (f"{OLD}.chatgpt", M, "", {"chatgpt": " a/b "}, Resolved(M, "a/b", reading=PRE)),
    (f"{OLD}.Chatgpt", M, "", None, Resolved("Chatgpt", None, keep=True, reading=KEEP)),  # exact names only
    ("openclaw.chatgpt", M, "", None, Resolved("chatgpt", None, keep=True, reading=KEEP)),
    # an agent named like a preset: the preset under the old id, the agent under any other
    (f"{OLD}.glm", "glm", "", None, Resolved("glm", "openrouter/z-ai/glm-5.2", reading=PRE)),
    ("openclaw.glm", "glm", "", None, Resolved("glm", None, reading=DEF)),
    ("openclaw.glm~openrouter/z-ai/glm-5.2", "glm", "", None, Resolved("glm", "openrouter/z-ai/glm-5.2", reading=OWN)),
    (f"{OLD}.glm~a/b", "glm", "", None, Resolved("glm", "a/b", reading=OWN)),
    # owc's own ids under the old Function id keep their meaning
    (f"{OLD}.main", M, "fake/fast", None, Resolved(M, "fake/fast", reading=DEF)),
    (f"{OLD}.main~ollama/qwen3:8b", M, "", None, Resolved(M, "ollama/qwen3:8b", reading=OWN)),
    # raw keys (the old Pipe's discovered models), unescaped, under any Function id
    (f"{OLD}.openai/gpt-5.5", M, "fake/fast", None, Resolved(M, "openai/gpt-5.5", reading=KEY)),
    (f"{OLD}.openrouter/z-ai/glm-5.2", M, "", None, Resolved(M, "openrouter/z-ai/glm-5.2", reading=KEY)),
    (f"{OLD}.ollama/llama3.1:8b", M, "", None, Resolved(M, "ollama/llama3.1:8b", reading=KEY)),
    (f"{OLD}.p/a,b", M, "", None, Resolved(M, "p/a,b", reading=KEY)),
    (f"{OLD}.p/a~2Cb", M, "", None, Resolved(M, "p/a~2Cb", reading=KEY)),  # raw: "~2C" is part of the key
    (f"{OLD}.workers-ai/@cf/x", M, "", None, Resolved(M, "workers-ai/@cf/x", reading=KEY)),
    ("openclaw.openai/gpt-5.5", M, "", None, Resolved(M, "openai/gpt-5.5", reading=KEY)),
    ("other.openai/gpt-5.5", "ops", "", None, Resolved("ops", "openai/gpt-5.5", reading=KEY)),
    # a "~" before the "/": owc's escaped entry, never a raw key
    (f"{OLD}.pro~v/x", M, "", None, Resolved("pro", None, keep=True, reading=KEEP)),
    # unknown sub ids: nothing owc or the old Pipe listed; the session's model is kept
    (f"{OLD}.gpt4", M, "fake/fast", None, Resolved("gpt4", None, keep=True, reading=KEEP)),
    (f"{OLD}.Fancy Name", M, "", None, Resolved("Fancy Name", None, keep=True, reading=KEEP)),
    (f"{OLD}./x", M, "", None, Resolved("/x", None, keep=True, reading=KEEP)),  # no provider before the "/"
    (f"{OLD}.p/a\x01", M, "", None, Resolved("p/a\x01", None, keep=True, reading=KEEP)),  # a control character
    (f"{OLD}.p/" + "x" * 400, M, "", None, Resolved("p/" + "x" * 400, None, keep=True, reading=KEEP)),  # too long
]


@pytest.mark.parametrize(("model_id", "agent", "default_model", "presets", "expected"), CELLS)
def test_every_cell_of_the_reading(
    model_id: Any, agent: str, default_model: str, presets: dict[str, str] | None, expected: Resolved
) -> None:
    assert mo.resolve(model_id, agent, default_model=default_model, presets=presets) == expected


def test_the_valves_feed_the_reading() -> None:
    """``resolve_with_valves``: DEFAULT_MODEL and the preset valves as the Function's Valves hold them."""
    valves = load_function(OLD).Pipe.Valves(DEFAULT_MODEL="fake/fast", OPUS_MODEL="anthropic/claude-opus-5")
    assert mo.resolve_with_valves(f"{OLD}.default", M, valves) == Resolved(M, "fake/fast", reading=OLDDEF)
    assert mo.resolve_with_valves(f"{OLD}.opus", M, valves).model == "anthropic/claude-opus-5"
    assert mo.resolve_with_valves(f"{OLD}.sonnet", M, valves).model == "anthropic/claude-sonnet-5"
    assert mo.resolve_with_valves("openclaw.main", M, types.SimpleNamespace()) == Resolved(M, None, reading=DEF)
    assert mo.resolve_with_valves("openclaw.main", M, {"DEFAULT_MODEL": "a/b"}).model == "a/b"  # a mapping too


@pytest.mark.parametrize(
    ("valves", "expected"),
    [
        (types.SimpleNamespace(), DEFAULT_KEYS),
        ({}, DEFAULT_KEYS),
        ({"CHATGPT_MODEL": "", "OPUS_MODEL": None, "SONNET_MODEL": 3, "GLM_MODEL": "\x00"}, DEFAULT_KEYS),
        ({p.valve: CUSTOM[p.name] for p in mo.PRESETS}, CUSTOM),
    ],
)
def test_preset_models_fall_back_to_the_old_defaults(valves: Any, expected: dict[str, str]) -> None:
    assert mo.preset_models(valves) == expected


def test_the_function_files_valves_carry_the_old_defaults() -> None:
    valves = load_function(None).Pipe.Valves()
    assert mo.preset_models(valves) == DEFAULT_KEYS
    assert mo.default_model_of(valves) == ""
    assert {p.valve: p.default for p in mo.PRESETS} == {
        "CHATGPT_MODEL": valves.CHATGPT_MODEL,
        "OPUS_MODEL": valves.OPUS_MODEL,
        "SONNET_MODEL": valves.SONNET_MODEL,
        "GLM_MODEL": valves.GLM_MODEL,
    }


@given(st.text(max_size=40), st.text(max_size=20), st.text(max_size=20))
def test_resolve_never_raises_and_keep_carries_no_model(model_id: str, agent: str, default_model: str) -> None:
    got = mo.resolve(model_id, agent, default_model=default_model)
    assert not (got.keep and got.model is not None)
    assert got.keep or got.agent == agent


# ---------------------------------------------------------------------------------------------- the Function id

HEX = "5ea78129ad78402d9ce582a90bd8c488"  # a uuid4().hex, fixed: parametrize ids must agree across xdist workers


@pytest.mark.parametrize(
    ("module_name", "expected"),
    [
        (f"function_openclaw_gateway_{HEX}", "openclaw_gateway"),
        (f"function_openclaw_{HEX}", "openclaw"),
        (f"function_a_b_c_{HEX}", "a_b_c"),
        (f"function__{HEX}", None),  # no id
        (f"function_{HEX}", None),
        (f"function_openclaw_{HEX.upper()}", None),  # uuid4().hex is lowercase
        (f"function_openclaw_{HEX[:31]}", None),
        ("openclaw_pipe", None),
        ("types", None),
        (None, None),
    ],
)
def test_the_function_id_is_read_from_open_webuis_module_name(module_name: Any, expected: str | None) -> None:
    assert mo.function_id_of_module(module_name) == expected


@pytest.mark.parametrize(("function_id", "old"), [(OLD, True), ("openclaw", False), (None, False)])
def test_the_valves_say_whether_owc_serves_the_old_id(function_id: str | None, old: bool) -> None:
    assert mo.serves_old_ids(load_function(function_id).Pipe.Valves()) is old


def test_valves_that_are_not_a_function_files_serve_owcs_ids() -> None:
    assert mo.serves_old_ids(types.SimpleNamespace()) is False
    assert mo.serves_old_ids({"AGENT_ID": "main"}) is False


# ---------------------------------------------------------------------------------------------- the list


def test_under_the_old_id_the_list_is_the_old_ids_each_choice_once() -> None:
    listed = mo.manifold_entries(M, CATALOG, whitelist=None, cap=30, reached=True, old_ids=True)
    assert listed == [
        {"id": "default", "name": "OpenClaw"},
        {"id": "fake/fake-model", "name": "Fake Model (fake) · OpenClaw"},
        {"id": "ollama/qwen3:8b", "name": "Qwen3 8B (ollama) · OpenClaw"},
        {"id": "openrouter/z-ai/glm-5.2", "name": "GLM 5.2 (openrouter) · OpenClaw"},
        {"id": "p/a,b", "name": "Comma (p) · OpenClaw"},  # raw, as the old Pipe listed it
        {"id": "chatgpt", "name": "openai/gpt-5.5 (old ChatGPT preset) · OpenClaw"},
        {"id": "opus", "name": "anthropic/claude-opus-4-8 (old Opus preset) · OpenClaw"},
        {"id": "sonnet", "name": "anthropic/claude-sonnet-5 (old Sonnet preset) · OpenClaw"},
        {"id": "glm", "name": "openrouter/z-ai/glm-5.2 (old GLM preset) · OpenClaw"},
    ]


def test_under_the_old_id_presets_are_named_by_their_valves_and_the_whitelist_and_cap_apply() -> None:
    listed = mo.manifold_entries(M, CATALOG, whitelist="qwen3:8b", cap=30, reached=True, old_ids=True, presets=CUSTOM)
    assert [e["id"] for e in listed] == ["default", "ollama/qwen3:8b", "chatgpt", "opus", "sonnet", "glm"]
    assert listed[2]["name"] == "openai/gpt-6 (old ChatGPT preset) · OpenClaw"
    capped = mo.manifold_entries(M, CATALOG, whitelist=None, cap=1, reached=True, old_ids=True)
    assert [e["id"] for e in capped] == ["default", "fake/fake-model", "chatgpt", "opus", "sonnet", "glm"]


def test_under_the_old_id_without_the_gateway_the_old_chats_still_have_their_ids() -> None:
    """Not reached: the default and the presets are listed (their chats reach owc, which says why it cannot send),
    and the models of the last answer; every name says the Gateway was not reached."""
    listed = mo.manifold_entries(M, [], whitelist=None, cap=30, reached=False, old_ids=True)
    assert [e["id"] for e in listed] == ["default", "chatgpt", "opus", "sonnet", "glm"]
    assert all(e["name"].endswith(" (Gateway not reached)") for e in listed)
    why = mo.manifold_entries(M, CATALOG[:1], whitelist=None, cap=30, reached=False, why="wrong token", old_ids=True)
    assert why[1] == {"id": "fake/fake-model", "name": "Fake Model (fake) · OpenClaw (wrong token)"}


def test_owcs_own_list_is_unchanged_without_the_old_id() -> None:
    listed = mo.manifold_entries(M, CATALOG, whitelist=None, cap=30, reached=True, presets=CUSTOM)
    assert [e["id"] for e in listed] == ["main", "main~fake/fake-model", "main~ollama/qwen3:8b",
                                         "main~openrouter/z-ai/glm-5.2", "main~p/a~2Cb"]  # fmt: skip


def _means(entry_id: str, agent: str, models: list[GatewayModel], presets: dict[str, str] | None) -> str | None:
    """What a listed entry was listed for: its model's key, a preset's key, or None for the Default entry."""
    if entry_id == "default":
        return None
    if entry_id in DEFAULT_KEYS:
        return (presets or DEFAULT_KEYS)[entry_id]
    keys = [m.key for m in models if entry_id in (m.key, mo.entry_id(agent, m.key))]
    assert len(keys) == 1
    return keys[0]


@given(
    st.lists(
        st.builds(gm, st.text(min_size=1, max_size=12).map(str.strip).filter(bool).filter(lambda t: "\x00" not in t),
                  st.text(min_size=1, max_size=20).map(str.strip).filter(bool).filter(lambda t: "\x00" not in t)),
        max_size=8,
    ),
    st.sampled_from([None, CUSTOM]),
)  # fmt: skip
def test_every_entry_listed_under_the_old_id_reads_back_as_what_it_was_listed_for(
    models: list[GatewayModel], presets: dict[str, str] | None
) -> None:
    read = mo.read_models({"models": [{"provider": m.provider, "id": m.id, "name": m.name} for m in models]})
    listed = mo.manifold_entries(M, read, whitelist=None, cap=100, reached=True, old_ids=True, presets=presets)
    ids = [e["id"] for e in listed]
    assert len(ids) == len(set(ids))
    for entry in listed:
        got = mo.resolve(f"{OLD}.{entry['id']}", M, default_model="", presets=presets)
        assert not got.keep and got.model == _means(entry["id"], M, read, presets), entry


def test_a_key_whose_provider_holds_a_tilde_is_listed_by_owcs_id_under_the_old_id() -> None:
    """Raw, ``pro~v/x`` would read as owc's entry of an agent ``pro``: it keeps owc's id, which reads back."""
    listed = mo.manifold_entries(M, [gm("pro~v", "x")], whitelist=None, cap=30, reached=True, old_ids=True)
    assert listed[1]["id"] == "main~pro~7Ev/x"
    assert mo.resolve(f"{OLD}.main~pro~7Ev/x", M).model == "pro~v/x"


# ---------------------------------------------------------------------------------------------- the select

#: The empty choice while owc knows none of the Gateway's models.
NONE_YET = {"value": "", "label": "The agent's own default (the Gateway's models show once owc lists them)"}


@pytest.mark.parametrize(
    ("models", "saved", "expected"),
    [
        ([], "", [NONE_YET]),
        ([], "fake/fast", [
            NONE_YET,
            {"value": "fake/fast", "label": "fake/fast (saved; the Gateway does not list it now)"},
        ]),
        (CATALOG[:2], "", [
            {"value": "", "label": "The agent's own default"},
            {"value": "fake/fake-model", "label": "Fake Model (fake/fake-model)"},
            {"value": "ollama/qwen3:8b", "label": "Qwen3 8B (ollama/qwen3:8b)"},
        ]),
        (CATALOG[:2], " ollama/qwen3:8b ", [  # saved and listed: once
            {"value": "", "label": "The agent's own default"},
            {"value": "fake/fake-model", "label": "Fake Model (fake/fake-model)"},
            {"value": "ollama/qwen3:8b", "label": "Qwen3 8B (ollama/qwen3:8b)"},
        ]),
        ([gm("a", "b", "B", available=False), "junk", None, gm("a", "b", "again")], "\x00", [
            {"value": "", "label": "The agent's own default"},
            {"value": "a/b", "label": "B (a/b) (unavailable)"},
        ]),
        (None, None, [NONE_YET]),
        ("not a list", 3, [NONE_YET]),
    ],
)  # fmt: skip
def test_default_model_options(models: Any, saved: Any, expected: list[dict[str, str]]) -> None:
    assert mo.default_model_options(models, saved) == expected


def open_webui_valves_spec(valves_class: type, user: Any = None) -> dict[str, Any]:
    """The valves spec Open WebUI 0.12.4's ``GET /api/v1/functions/id/{id}/valves/spec`` answers: the Valves' JSON
    schema with each ``input.options`` resolved by the rules its ``resolve_valves_schema_options`` follows (the
    module doc), written here from those rules."""
    schema = valves_class.model_json_schema()
    for name, field in valves_class.model_fields.items():  # type: ignore[attr-defined]
        extra = field.json_schema_extra
        options = extra.get("input", {}).get("options") if isinstance(extra, dict) else None
        if isinstance(options, str) and options:
            method = getattr(valves_class, options, None)
            assert callable(method), f"{name}: Open WebUI would find no method {options!r}"
            params = inspect.signature(method).parameters
            kwargs = {k: user for k in ("__user__", "user") if k in params and user is not None}
            resolved = method(**kwargs)
            if isinstance(resolved, list):
                schema["properties"][name]["input"] = {**schema["properties"][name]["input"], "options": resolved}
    return schema


def rendered_as_select(prop: dict[str, Any]) -> bool:
    """``Valves.svelte`` (0.12.4) takes the select branch: no enum, not a boolean, a string, input select, options."""
    options = prop.get("input", {}).get("options")
    return (
        "enum" not in prop
        and prop.get("type") == "string"
        and prop["input"].get("type") == "select"
        and isinstance(options, list)
        and bool(options)
        and all(isinstance(o, str) or {type(o.get("value")), type(o.get("label"))} == {str} for o in options)
    )


def test_the_default_model_valve_is_a_select_of_a_method_open_webui_finds_on_the_valves() -> None:
    valves_class = load_function(OLD).Pipe.Valves
    raw = valves_class.model_json_schema()["properties"]["DEFAULT_MODEL"]
    assert raw["input"] == {"type": "select", "options": "get_model_options"}
    assert raw["default"] == "" and raw["type"] == "string"
    assert inspect.ismethod(valves_class.get_model_options)  # a classmethod: called on the class, no instance
    assert "get_model_options" not in valves_class.model_fields
    spec = open_webui_valves_spec(valves_class, user={"id": "admin"})
    prop = spec["properties"]["DEFAULT_MODEL"]
    assert rendered_as_select(prop)
    assert prop["input"]["options"][0]["value"] == ""  # the agent's own default first
    # The other valves keep their inputs; the presets are plain text inputs with the old defaults.
    for name, default in {p.valve: p.default for p in mo.PRESETS}.items():
        assert spec["properties"][name]["default"] == default and "input" not in spec["properties"][name]
        assert "old Pipe" in spec["properties"][name]["description"]


def test_the_options_method_without_a_runtime_gives_the_default_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """owc not started in this process (a worker that has served no chat, or settings it cannot use): the empty
    choice alone, never an error. ``test_owui_settings`` covers the runtime's models and the saved value."""
    from owc.owui import process

    monkeypatch.setattr(process, "_STARTED", None)
    options = load_function(OLD).Pipe.Valves.get_model_options()
    assert options == mo.default_model_options([], "")
    assert process.default_model_options() == options


# ---------------------------------------------------------------------------------------------- through the Pipe

#: ``owc/owui/pipe.py`` calls ``resolve_with_valves`` and lists with ``old_ids`` / ``presets`` once the change
#: issue 28 hands its owner is applied; until then these fail (strict: the marker goes with that change).


def test_the_pipe_lists_the_old_ids_under_the_old_function_id_even_without_owc(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from owc.owui import pipe as owui_pipe
    from owc.owui import process

    monkeypatch.setattr(process, "_STARTED", None)
    old = asyncio.run(owui_pipe.pipes(load_function(OLD).Pipe.Valves(GLM_MODEL="z-ai/glm-6")))
    assert [e["id"] for e in old] == ["default", "chatgpt", "opus", "sonnet", "glm"]
    assert old[-1]["name"] == "z-ai/glm-6 (old GLM preset) · OpenClaw (Gateway not reached)"
    own = asyncio.run(owui_pipe.pipes(load_function("openclaw").Pipe.Valves()))
    assert [e["id"] for e in own] == ["main"]


@pytest.mark.parametrize(
    ("model_id", "valves", "model"),
    [
        ("openclaw.main", {}, None),
        pytest.param("openclaw.main", {"DEFAULT_MODEL": "fake/fast"}, "fake/fast"),
        ("openclaw.main~ollama/qwen3:8b", {"DEFAULT_MODEL": "fake/fast"}, "ollama/qwen3:8b"),
        pytest.param(f"{OLD}.default", {"DEFAULT_MODEL": "fake/fast"}, "fake/fast"),
        pytest.param(f"{OLD}.opus", {}, "anthropic/claude-opus-4-8"),
        pytest.param(f"{OLD}.opus", {"OPUS_MODEL": "anthropic/claude-opus-5"}, "anthropic/claude-opus-5"),
        pytest.param(f"{OLD}.openai/gpt-5.5", {}, "openai/gpt-5.5"),
        ("openclaw.ops", {"DEFAULT_MODEL": "fake/fast"}, "keep"),
    ],
)
def test_a_turn_uses_what_its_model_id_means(model_id: str, valves: dict[str, str], model: str | None) -> None:
    from owc.owui import pipe as owui_pipe
    from owc.runtime import KEEP_MODEL

    body = {"model": model_id, "messages": [{"role": "user", "content": "hi"}]}
    turn = owui_pipe._turn_from(
        load_function(OLD).Pipe.Valves(**valves), body, {"id": "u"}, {"chat_id": "c", "message_id": "m"}
    )
    assert not isinstance(turn, str)
    assert turn.model == (KEEP_MODEL if model == "keep" else model)
