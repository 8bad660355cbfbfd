"""owc's settings inside Open WebUI (issue 25, items 4 and 6): a saved connection valve is applied at once (the
connection closed and the next opened with it, found through ``pipe()`` / ``pipes()``, which Open WebUI calls with
the saved valves, or the ``function.valves_updated`` event); a refusal is said in the model picker and the reply;
settings that cannot be used are one line naming the valve.

As ``tests/test_owui_process.py``: owc hosted as a Trio guest on this test's asyncio loop with ``FakeOpenWebUI``, the
Gateway simulator in its own thread on loopback; waits are on events the other side sets, never on a clock."""

from __future__ import annotations

import asyncio
import logging
import sys
import types
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from owc.owui import pipe as owui_pipe
from owc.owui import process, trio_host
from owc.owui.process import HostSettings, connection_changes

from conftest import secret
from owui.fake_surface import FakeOpenWebUI
from owui.simthread import call, simulator_thread

TOKEN = secret("owui-settings-token-" + uuid.uuid4().hex)
OTHER_TOKEN = secret("owui-settings-other-" + uuid.uuid4().hex)


def test_connection_changes_name_the_valves_never_the_values(tmp_path: Path) -> None:
    base = HostSettings(gateway_url="ws://a:1/", token=TOKEN, database_url="sqlite://")
    assert connection_changes(base, base) == ()
    assert connection_changes(base, attrs.evolve(base, agent_id="ops")) == ()  # read per call: no reconnect
    assert connection_changes(base, attrs.evolve(base, gateway_url="ws://b:1/")) == ("GATEWAY_URL",)
    moved = attrs.evolve(base, token=OTHER_TOKEN, device_dir=tmp_path, pin_sha256="ab" * 32, ca_file=tmp_path / "c")
    assert connection_changes(base, moved) == ("GATEWAY_TOKEN", "DEVICE_DIR", "GATEWAY_CA_FILE", "GATEWAY_TLS_PIN")
    config = base.gateway_config()
    assert config.hold_refusals and "GATEWAY_TOKEN valve" in config.names.token
    from_env = attrs.evolve(base, token_source="OWC_GATEWAY_TOKEN").gateway_config()
    assert "OWC_GATEWAY_TOKEN in Open WebUI's environment" in from_env.names.token


@pytest.fixture
def open_webui(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """The parts of Open WebUI owc reads its settings from: ``open_webui.env`` (the database, DATA_DIR) and the saved
    valves (``Functions.get_function_valves_by_id``), as modules of a stand-in package."""
    saved: dict[str, Any] = {}

    class Functions:
        @staticmethod
        async def get_function_valves_by_id(function_id: str) -> dict[str, Any]:
            assert function_id == "openclaw"
            return dict(saved)

    package = types.ModuleType("open_webui")
    package.__path__ = []  # type: ignore[attr-defined]
    env = types.ModuleType("open_webui.env")
    env.DATABASE_URL = f"sqlite:///{tmp_path / 'webui.db'}"  # type: ignore[attr-defined]
    env.DATA_DIR = str(tmp_path / "data")  # type: ignore[attr-defined]
    models = types.ModuleType("open_webui.models")
    models.__path__ = []  # type: ignore[attr-defined]
    functions = types.ModuleType("open_webui.models.functions")
    functions.Functions = Functions  # type: ignore[attr-defined]
    for name, module in {
        "open_webui": package,
        "open_webui.env": env,
        "open_webui.models": models,
        "open_webui.models.functions": functions,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    for name in ("OWC_GATEWAY_URL", "OWC_GATEWAY_TOKEN", "OWC_GATEWAY_TOKEN_FILE", "OWC_DEVICE_DIR"):
        monkeypatch.delenv(name, raising=False)
    from owc.store import ChatStore, make_engine

    store = ChatStore(make_engine(env.DATABASE_URL))
    store.create_tables()
    store.engine.dispose()
    return saved


def _valves(url: str, token: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        GATEWAY_URL=url, GATEWAY_TOKEN=token, DEVICE_DIR="off", AGENT_ID="", MODEL_WHITELIST="", MAX_MODELS=30
    )


def _subscribed(sim: Any, sim_token: Any) -> int:
    return call(sim_token, lambda: sum(1 for c in sim.conns.values() if c.subscribed and not c.closing))


async def _until_subscribed(sim: Any, sim_token: Any, count: int) -> None:
    """Until ``count`` live subscribed connections: the simulator's own wait (an event on its side), from a thread."""

    def live() -> bool:
        return sum(1 for c in sim.conns.values() if c.subscribed and not c.closing) == count

    async def bounded() -> None:
        with trio.fail_after(60):  # a bound for a failing test: another thread's connection, not a decision
            await sim.wait_for(live)

    await asyncio.to_thread(trio.from_thread.run, bounded, trio_token=sim_token)


async def _opened(client: Any, count: int) -> None:
    """Until owc's client has completed ``count`` hellos: its own wake-ups (``wait_connection``), bounded."""
    with trio.fail_after(60):  # a bound for a failing test, not a decision
        while client.connections_opened < count:
            await client.wait_connection(newer_than=client.connection)


def test_a_saved_url_valve_moves_owc_to_the_other_gateway_without_a_restart(open_webui, caplog) -> None:
    caplog.set_level(logging.INFO)
    with simulator_thread(TOKEN) as (old, old_token), simulator_thread(OTHER_TOKEN) as (new, new_token):

        async def body() -> None:
            first = owui_pipe.settings_from(_valves(old.url, TOKEN))
            runtime = await process.ensure_started(first, FakeOpenWebUI())
            try:
                client = runtime.client
                await trio_host.process_host().run_in_trio(runtime.connected)
                assert _subscribed(old, old_token) == 1
                # The admin saves the other Gateway's URL and token: Open WebUI's next pipes() call has them.
                listed = await owui_pipe.pipes(_valves(new.url, OTHER_TOKEN))
                assert listed[0]["id"] == "main"
                await _until_subscribed(new, new_token, 1)
                await _until_subscribed(old, old_token, 0)
                assert process.current_runtime()[1] is runtime and client.url == new.url
                # Back, through the event the worker that saved the valves publishes (Open WebUI 0.12.4's
                # ``function.valves_updated``, subject the Pipe), with the valves as saved.
                open_webui.update(GATEWAY_URL=old.url, GATEWAY_TOKEN=TOKEN, DEVICE_DIR="off")
                event = {"event": "function.valves_updated", "subject": {"type": "function", "id": "openclaw"}}
                await owui_pipe.on_event(event, None)
                await _until_subscribed(old, old_token, 1)
                await _until_subscribed(new, new_token, 0)
                other = {"event": "function.valves_updated", "subject": {"type": "function", "id": "some_tool"}}
                await owui_pipe.on_event(other, None)  # another Function's valves: nothing
                # The simulator marks a connection subscribed before owc has the subscribe's answer (and counts the
                # connection): wait on owc's side for its third hello, then check it made no fourth.
                await trio_host.process_host().run_in_trio(_opened, client, 3)
                assert client.connections_opened == 3
            finally:
                await process.shutdown()
            applied = [r.getMessage() for r in caplog.records if "owui.settings_applied" in r.getMessage()]
            assert (
                applied == ["owui.settings_applied changed=GATEWAY_URL,GATEWAY_TOKEN (reconnecting with them now)"] * 2
            )

        with asyncio.Runner() as runner:
            runner.run(body())


def test_a_wrong_token_is_said_in_the_picker_and_in_the_reply_and_a_saved_token_connects(open_webui, caplog) -> None:
    with simulator_thread(TOKEN) as (sim, sim_token):

        async def body() -> None:
            wrong = owui_pipe.settings_from(_valves(sim.url, OTHER_TOKEN))
            runtime = await process.ensure_started(wrong, FakeOpenWebUI())
            try:
                await trio_host.process_host().run_in_trio(runtime.client.wait_held)
                listed = await owui_pipe.pipes(_valves(sim.url, OTHER_TOKEN))
                assert listed == [{"id": "main", "name": "OpenClaw (wrong token: see GATEWAY_TOKEN valve)"}]
                # The saved right token: applied by the next call, connected without a restart.
                listed = await owui_pipe.pipes(_valves(sim.url, TOKEN))
                await trio_host.process_host().run_in_trio(runtime.connected)
                assert _subscribed(sim, sim_token) == 1 and process.current_runtime()[1] is runtime
            finally:
                await process.shutdown()
            assert not any(r.exc_info for r in caplog.records if r.name.startswith("owc"))  # no traceback
            refused = [r for r in caplog.records if r.getMessage().startswith("gateway.refused ")]
            assert len(refused) == 1 and "AUTH_TOKEN_MISMATCH" in refused[0].getMessage()

        with asyncio.Runner() as runner:
            runner.run(body())


def test_settings_that_cannot_be_used_are_the_reply_naming_the_valve(open_webui) -> None:
    valves = types.SimpleNamespace(GATEWAY_URL="", GATEWAY_TOKEN="", AGENT_ID="")
    body = {"messages": [{"role": "user", "content": "hi"}]}
    reply = asyncio.run(owui_pipe.pipe(valves, body, user={"id": "u"}, metadata={"chat_id": "c", "message_id": "m"}))
    assert reply == (
        "owc cannot use the OpenClaw Pipe's settings, so your message was not sent: no Gateway token: set the Pipe's"
        " GATEWAY_TOKEN or GATEWAY_TOKEN_FILE valve, or OWC_GATEWAY_TOKEN / OWC_GATEWAY_TOKEN_FILE in Open WebUI's"
        " environment."
    )
    bad_url = types.SimpleNamespace(GATEWAY_URL="ftp://gw", GATEWAY_TOKEN=TOKEN, AGENT_ID="")
    reply = asyncio.run(owui_pipe.pipe(bad_url, body, user={"id": "u"}, metadata={"chat_id": "c", "message_id": "m"}))
    assert reply.startswith("owc cannot use the OpenClaw Pipe's settings") and "GATEWAY_URL" in reply
    assert TOKEN not in reply and "\n" not in reply


def test_every_valve_says_its_default_and_the_secret_one_is_a_masked_input() -> None:
    """Item 5: Open WebUI 0.12.4 renders a string valve whose schema says ``{"input": {"type": "password"}}`` as its
    SensitiveInput (dots, an eye button to reveal: ``Valves.svelte``); every secret valve is one, nothing else is.
    Item 6: each valve's description says what an empty valve falls back to."""
    import importlib.util

    from owc.owui.install import function_source

    spec = importlib.util.spec_from_loader("openclaw_pipe", loader=None)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    exec(compile(function_source("openclaw_pipe.py"), "openclaw_pipe.py", "exec"), module.__dict__)
    properties = module.Pipe.Valves.model_json_schema()["properties"]
    secret_valves = {"GATEWAY_TOKEN"}
    assert {name for name, p in properties.items() if p.get("input", {}).get("type") == "password"} == secret_valves
    for name, schema in properties.items():
        assert "Default: " in schema["description"], name
    assert "ws://127.0.0.1:18789" in properties["GATEWAY_URL"]["description"]
    assert properties["MAX_MODELS"]["description"].endswith("Default: 30")


def test_the_default_model_valve_is_carried_and_no_connection_setting() -> None:
    """Issue 28: the DEFAULT_MODEL valve rides on the settings (the select shows the saved value from them) and a
    change to it reconnects nothing (each turn reads it from its Valves)."""
    valves = {"GATEWAY_URL": "ws://a:1/", "GATEWAY_TOKEN": TOKEN, "DEVICE_DIR": "off", "DEFAULT_MODEL": " a/b "}
    settings = process.settings_from(valves, {}, database_url="sqlite://")
    assert settings.default_model == "a/b"
    assert process.settings_from({**valves, "DEFAULT_MODEL": ""}, {}, database_url="sqlite://").default_model == ""
    assert connection_changes(settings, attrs.evolve(settings, default_model="")) == ()


def test_the_default_model_select_lists_the_models_owc_last_listed_and_the_saved_value(open_webui) -> None:
    """Issue 28 (inventory B4): the valve's options method, as Open WebUI 0.12.4 calls it when the valves open (on
    the Valves class, synchronously, on its loop), lists the Gateway's models as the runtime last listed them (the
    simulator's catalog, through a real ``pipes()``), the empty choice first, and the saved value the Gateway does
    not list; after owc closed, the empty choice and the saved value."""
    from test_owui_legacy_models import load_function

    from owc.owui import models
    from owc.sim.model import MODEL_CATALOG

    valves_class = load_function("openclaw").Pipe.Valves
    with simulator_thread(TOKEN) as (sim, _):

        async def body() -> None:
            valves = valves_class(GATEWAY_URL=sim.url, GATEWAY_TOKEN=TOKEN, DEVICE_DIR="off", DEFAULT_MODEL="old/gone")
            runtime = await process.ensure_started(owui_pipe.settings_from(valves), FakeOpenWebUI())
            try:
                await trio_host.process_host().run_in_trio(runtime.connected)
                await owui_pipe.pipes(valves)  # Open WebUI's model list: the runtime keeps the Gateway's answer
                options = valves_class.get_model_options()
                keys = [models.model_key(m["provider"], m["id"]) for m in MODEL_CATALOG]
                assert [o["value"] for o in options] == ["", *keys, "old/gone"]
                assert options[0]["label"] == models.AGENT_DEFAULT_LABEL
                assert options[-1]["label"] == "old/gone (saved; the Gateway does not list it now)"
                # Saved again as one the Gateway lists: shown once, under its name.
                await owui_pipe.pipes(valves.model_copy(update={"DEFAULT_MODEL": keys[1]}))
                assert [o["value"] for o in valves_class.get_model_options()] == ["", *keys]
            finally:
                await process.shutdown()
            closed = valves_class.get_model_options()
            assert [o["value"] for o in closed] == ["", keys[1]]

        with asyncio.Runner() as runner:
            runner.run(body())
