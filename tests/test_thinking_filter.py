"""The thinking Filter Function (``owc/owui/functions/openclaw_thinking.py`` over ``owc/owui/thinking_filter.py``)
and its install next to the Pipe (``owc owui install``), issue 28. The Function file is loaded as Open WebUI loads
it (executed as a module, the class instantiated); Open WebUI's own run of it (toggle, user valves) is the W tier's
(``tests/test_owui_w_thinking.py``)."""

from __future__ import annotations

import types
from typing import Any

from test_owui_install import FakeOpenWebUI, _api

from owc.owui.install import function_source, install
from owc.owui.thinking_filter import FILTER_ID, UserValves
from owc.rules.thinking import PICKER


def _filter() -> Any:
    module = types.ModuleType("function_openclaw_thinking")
    exec(compile(function_source("openclaw_thinking.py"), "openclaw_thinking.py", "exec"), module.__dict__)
    return module.Filter()


def _user(level: str) -> dict[str, Any]:
    return {"id": "u1", "valves": UserValves(level=level)}


def test_the_function_is_a_toggle_filter_with_the_ladder_as_its_choices() -> None:
    source = function_source("openclaw_thinking.py")
    assert source.splitlines()[0] == '"""' and "\nclass Filter:" in source and "title: OpenClaw thinking\n" in source
    f = _filter()
    assert f.toggle is True and f.icon.startswith("data:image/svg+xml;base64,")
    schema = f.UserValves.model_json_schema()["properties"]["level"]
    assert schema["enum"] == ["default", *PICKER] and schema["default"] == "default"
    assert set(f.Valves.model_json_schema()["properties"]) == {"priority", "override_advanced_params"}


def test_the_inlet_writes_reasoning_effort_only_for_a_chosen_level() -> None:
    f = _filter()
    assert f.inlet({"messages": []}, _user("high")) == {"messages": [], "reasoning_effort": "high"}
    assert f.inlet({"messages": []}, _user("default")) == {"messages": []}
    assert f.inlet({"messages": []}, None) == {"messages": []}
    assert f.inlet({"messages": []}, {"id": "u1"}) == {"messages": []}  # no user valves saved yet
    # Over Advanced Params' "Reasoning Effort": the Filter wins unless its valve says not to.
    assert f.inlet({"reasoning_effort": "low"}, _user("max")) == {"reasoning_effort": "max"}
    f.valves = f.Valves(override_advanced_params=False)
    assert f.inlet({"reasoning_effort": "low"}, _user("max")) == {"reasoning_effort": "low"}
    assert f.inlet({}, _user("max")) == {"reasoning_effort": "max"}


def test_install_adds_the_filter_attached_to_owcs_models_and_never_global() -> None:
    fake, lines = FakeOpenWebUI(), []
    install(_api(fake), report=lines.append)
    thinking = fake.functions[FILTER_ID]
    assert thinking["is_active"] and thinking["content"] == function_source("openclaw_thinking.py")
    assert not thinking.get("is_global")
    row = fake.models["openclaw.main"]
    assert (
        row["meta"] == {"filterIds": [FILTER_ID], "actionIds": ["openclaw_status"]}
        and row["base_model_id"] is None
        and row["name"] == "OpenClaw"
    )
    assert f"attached {FILTER_ID} to openclaw.main" in lines
    assert not any("global" in line for line in lines)
    # Again: nothing to attach; a row the admin edited keeps its settings, the Filter added to its own.
    fake.models["openclaw.main"] = {
        "id": "openclaw.main",
        "name": "My agent",
        "meta": {"description": "kept", "filterIds": ["other"]},
        "params": {"system": "kept"},
        "is_active": True,
    }
    again: list[str] = []
    install(_api(fake), report=again.append)
    row = fake.models["openclaw.main"]
    assert (
        row["meta"] == {"description": "kept", "filterIds": ["other", FILTER_ID], "actionIds": ["openclaw_status"]}
        and row["name"] == "My agent"
    )
    assert row["params"] == {"system": "kept"}
    third: list[str] = []
    install(_api(fake), report=third.append)
    assert not any(line.startswith("attached") for line in third)


def test_a_filter_made_global_by_an_admin_is_said_and_left() -> None:
    fake = FakeOpenWebUI()
    install(_api(fake), report=lambda _: None)
    fake.functions[FILTER_ID]["is_global"] = True
    lines: list[str] = []
    install(_api(fake), report=lines.append)
    assert fake.functions[FILTER_ID]["is_global"] is True
    assert any(line.startswith(f"warning: {FILTER_ID} is global") for line in lines)
