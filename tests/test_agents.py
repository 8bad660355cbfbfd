"""Issue 31, one model per OpenClaw agent (fast tier): ``agents.list`` read as the real Gateway 2026.9.6 answers it
(the measured payload below, ``docs/measured/agents-2026.9.6.md``), the picker's entries (each agent after "OpenClaw",
its name and emoji, the whitelist, the old Function id), what a picked entry means (``models.resolve_agent``), the
chat-keeps-its-agent rule (``owc.rules.agents``), the simulator's ``agents.list`` and a real ``pipes()`` against it,
and the Pipe's choice of agent for a turn (``pipe._on_agent``) with the chat's history read from a real store."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import types
import uuid
from pathlib import Path
from typing import Any

import pytest

from owc.owui import models as mo
from owc.owui import pipe as owui_pipe
from owc.protocol.agents import AgentRoster, GatewayAgent, read_agents
from owc.rules import agents as rule
from owc.runtime import KEEP_MODEL
from owc.sim.agents import TEA_PNG

ROOT = Path(__file__).resolve().parent.parent

#: ``agents.list {}`` on the real Gateway 2026.9.6, three agents configured offline (``main`` default, ``matcha`` with a
#: name and an identity whose avatar is a data URL, ``saffron`` with only an identity and an http avatar). Paths
#: redacted; nothing else changed.
MEASURED = json.loads(  # the avatar: the measured 1x1 PNG, the simulator's ``TEA_PNG``
    r"""{
 "defaultId": "main",
 "ownership": "legacy",
 "selectionRequired": false,
 "mainKey": "main",
 "scope": "per-sender",
 "agents": [
  {
   "id": "main",
   "workspace": "/tmp/owc-realgw-cut-XXXX/workspace",
   "workspaceGit": false,
   "agentRuntime": {
    "id": "auto",
    "cloudPlacementSupported": false,
    "devicePlacementSupported": false,
    "source": "implicit"
   },
   "thinkingLevels": [
    {
     "id": "off",
     "label": "off"
    }
   ],
   "thinkingOptions": [
    "off"
   ],
   "thinkingDefault": "off",
   "model": {
    "primary": "fake/fake-model"
   },
   "defaultPermissionMode": "full"
  },
  {
   "id": "matcha",
   "name": "Matcha",
   "identity": {
    "name": "Matcha",
    "theme": "calm tea",
    "emoji": "🍵",
    "avatar": "@PNG@",
    "avatarUrl": "@PNG@"
   },
   "workspace": "/tmp/owc-realgw-cut-XXXX/workspace/matcha",
   "workspaceGit": false,
   "agentRuntime": {
    "id": "auto",
    "cloudPlacementSupported": false,
    "devicePlacementSupported": false,
    "source": "implicit"
   },
   "thinkingLevels": [
    {
     "id": "off",
     "label": "off"
    }
   ],
   "thinkingOptions": [
    "off"
   ],
   "thinkingDefault": "off",
   "model": {
    "primary": "fake/fake-model"
   },
   "defaultPermissionMode": "full"
  },
  {
   "id": "saffron",
   "name": "Saffron",
   "identity": {
    "name": "Saffron",
    "emoji": "🌶",
    "avatar": "https://example.invalid/saffron.png",
    "avatarUrl": "https://example.invalid/saffron.png"
   },
   "workspace": "/tmp/owc-realgw-cut-XXXX/workspace/saffron",
   "workspaceGit": false,
   "agentRuntime": {
    "id": "auto",
    "cloudPlacementSupported": false,
    "devicePlacementSupported": false,
    "source": "implicit"
   },
   "thinkingLevels": [
    {
     "id": "off",
     "label": "off"
    }
   ],
   "thinkingOptions": [
    "off"
   ],
   "thinkingDefault": "off",
   "model": {
    "primary": "fake/fake-model"
   },
   "defaultPermissionMode": "full"
  }
 ]
}""".replace("@PNG@", TEA_PNG)
)
PNG = MEASURED["agents"][1]["identity"]["avatarUrl"]

MATCHA = GatewayAgent("matcha", "Matcha", "\U0001f375", PNG)
SAFFRON = GatewayAgent("saffron", "Saffron", "\U0001f336", "https://example.invalid/saffron.png")


# ---------------------------------------------------------------------------------------------- reading agents.list


def test_the_measured_answer_reads_as_three_agents_with_names_emoji_and_avatars() -> None:
    roster = read_agents(MEASURED)
    assert roster == AgentRoster((GatewayAgent("main"), MATCHA, SAFFRON), default_id="main")
    assert [a.label for a in roster.agents] == ["main", "Matcha", "Saffron"]


@pytest.mark.parametrize(
    "payload",
    [None, [], "x", {}, {"agents": None}, {"agents": {}}, {"agents": [None, 1, "main", {"id": 3}, {"id": "Bad Id"}]}],
)
def test_an_answer_of_another_shape_is_an_empty_roster(payload: Any) -> None:
    assert read_agents(payload).agents == ()


def test_hostile_entries_are_cleaned_or_skipped() -> None:
    payload = {
        "defaultId": "../etc",
        "agents": [
            {"id": "a", "name": "A\nB\u202e", "identity": {"emoji": "\x07", "avatar": "javascript:alert(1)"}},
            {"id": "a", "name": "again"},  # a second entry with an id already read
            {"id": "b", "identity": {"name": "x" * 500, "avatarUrl": "data:image/svg+xml;base64,PHN2Zz4="}},
            {"id": "c", "identity": "not an object", "name": 5},
        ],
    }
    roster = read_agents(payload)
    assert roster.default_id is None
    assert roster.agents == (
        GatewayAgent("a", "A B"),
        GatewayAgent("b", "x" * 79 + "…"),
        GatewayAgent("c"),
    )


# ---------------------------------------------------------------------------------------------- the picker


def _gm(key: str, name: str) -> mo.GatewayModel:
    provider, _, model_id = key.partition("/")
    return mo.GatewayModel(provider=provider, id=model_id, name=name)


MODELS = [_gm("fake/fake-model", "Fake Model"), _gm("fake/fake-alt", "Fake Alt")]
AGENTS = read_agents(MEASURED).agents


def test_each_other_agent_is_listed_after_openclaw_by_its_name_before_the_models() -> None:
    entries = mo.manifold_entries("main", MODELS, whitelist="", cap=30, reached=True, agents=AGENTS)
    assert entries == [
        {"id": "main", "name": "OpenClaw"},
        {"id": "matcha", "name": "\U0001f375 Matcha · OpenClaw"},
        {"id": "saffron", "name": "\U0001f336 Saffron · OpenClaw"},
        {"id": "main~fake/fake-model", "name": "Fake Model (fake) · OpenClaw"},
        {"id": "main~fake/fake-alt", "name": "Fake Alt (fake) · OpenClaw"},
    ]
    # Every agent entry's lasting name is itself (what a model row keeps).
    assert all(mo.lasting_name(e["name"]) == e["name"] for e in entries)


def test_the_default_entrys_agent_is_not_listed_twice_and_another_agent_id_keeps_its_own_entry() -> None:
    entries = mo.manifold_entries("matcha", [], whitelist="", cap=30, reached=True, agents=AGENTS)
    assert [e["id"] for e in entries] == ["matcha", "main", "saffron"]
    assert entries[1]["name"] == "main · OpenClaw"  # the Gateway names it not: its id


@pytest.mark.parametrize(
    ("whitelist", "ids"),
    [
        ("", ["matcha", "saffron"]),
        ("matcha", ["matcha"]),
        (" SAFFRON , nope", ["saffron"]),
        ("Matcha", ["matcha"]),  # its name, case-insensitively
        ("main", []),  # the Default entry's agent is always "OpenClaw"
        ("nope", []),
    ],
)
def test_the_agent_whitelist_picks_the_agents_listed(whitelist: str, ids: list[str]) -> None:
    entries = mo.manifold_entries(
        "main", [], whitelist="", cap=30, reached=True, agents=AGENTS, agent_whitelist=whitelist
    )
    assert [e["id"] for e in entries] == ["main", *ids]


def test_not_reached_marks_the_agents_too() -> None:
    entries = mo.manifold_entries("main", [], whitelist="", cap=30, reached=False, agents=AGENTS[:2])
    assert entries == [
        {"id": "main", "name": "OpenClaw (Gateway not reached)"},
        {"id": "matcha", "name": "\U0001f375 Matcha · OpenClaw (Gateway not reached)"},
    ]


def test_another_agents_models_are_listed_when_asked_and_named_with_the_agent() -> None:
    entries = mo.manifold_entries(
        "main",
        MODELS[:1],
        whitelist="",
        cap=30,
        reached=True,
        agents=AGENTS,
        agent_models={"matcha": MODELS, "main": MODELS},
    )
    assert entries[3:] == [
        {"id": "main~fake/fake-model", "name": "Fake Model (fake) · OpenClaw"},
        {"id": "matcha~fake/fake-model", "name": "Fake Model (fake) · Matcha · OpenClaw"},
        {"id": "matcha~fake/fake-alt", "name": "Fake Alt (fake) · Matcha · OpenClaw"},
    ]
    # An agent whitelisted out has no model entries either.
    out = mo.manifold_entries(
        "main", [], whitelist="", cap=30, reached=True, agents=AGENTS, agent_whitelist="saffron",
        agent_models={"matcha": MODELS},
    )  # fmt: skip
    assert [e["id"] for e in out] == ["main", "saffron"]


def test_under_the_old_function_id_agents_follow_the_default_entry_and_old_words_are_not_agents() -> None:
    agents = (*AGENTS, GatewayAgent("opus", "Opus agent"), GatewayAgent("default"))
    entries = mo.manifold_entries("main", MODELS[:1], whitelist="", cap=30, reached=True, old_ids=True, agents=agents)
    ids = [e["id"] for e in entries]
    assert ids[:4] == ["default", "matcha", "saffron", "fake/fake-model"]
    assert "opus" in ids and ids.count("opus") == 1  # the preset, never the agent
    assert next(e for e in entries if e["id"] == "opus")["name"].endswith("(old Opus preset) · OpenClaw")


def test_every_listed_entry_reads_back_as_what_it_was_listed_for() -> None:
    known = {"matcha", "saffron"}
    entries = mo.manifold_entries(
        "main", MODELS, whitelist="", cap=30, reached=True, agents=AGENTS, agent_models={"matcha": MODELS}
    )
    for entry in entries:
        got = mo.resolve_agent(f"openclaw.{entry['id']}", "main", known)
        agent, key = mo.model_for_entry(entry["id"])
        assert (got.agent, got.model, got.keep) == (agent, key, False), entry


def test_the_avatar_goes_into_a_model_rows_meta() -> None:
    assert mo.agent_model_meta(MATCHA) == {
        "description": "The OpenClaw agent Matcha (matcha)",
        "profile_image_url": PNG,
    }
    assert "profile_image_url" not in mo.agent_model_meta(GatewayAgent("main"))


# ---------------------------------------------------------------------------------------------- what a pick means


KNOWN = {"matcha", "saffron"}


@pytest.mark.parametrize(
    ("model_id", "known", "expected"),
    [
        ("openclaw.matcha", KNOWN, mo.Resolved("matcha", None, reading="agent")),
        ("openclaw.matcha~fake/fake-alt", KNOWN, mo.Resolved("matcha", "fake/fake-alt", reading="agent model")),
        ("openclaw_gateway.matcha", KNOWN, mo.Resolved("matcha", None, reading="agent")),
        # an agent owc does not list reads as before: the AGENT_ID agent's session, its model kept
        ("openclaw.ghost", KNOWN, mo.Resolved("ghost", None, keep=True, reading="another agent")),
        ("openclaw.matcha", set(), mo.Resolved("matcha", None, keep=True, reading="another agent")),
        # owc's own and the old Pipe's ids are read as they always were
        ("openclaw.main", KNOWN, mo.Resolved("main", None, reading="default")),
        ("openclaw.main~fake/fake-alt", KNOWN, mo.Resolved("main", "fake/fake-alt", reading="model")),
        ("openclaw_gateway.opus", {"opus"}, mo.Resolved("main", "anthropic/claude-opus-4-8", reading="preset")),
        ("openclaw.fake/fake-alt", KNOWN, mo.Resolved("main", "fake/fake-alt", reading="old model")),
        ("openclaw.Bad Id", {"Bad Id"}, mo.Resolved("Bad Id", None, keep=True, reading="another agent")),
        (None, KNOWN, mo.Resolved("main", None, reading="default")),
    ],
)
def test_resolve_agent(model_id: Any, known: set[str], expected: mo.Resolved) -> None:
    assert mo.resolve_agent(model_id, "main", known) == expected


# ---------------------------------------------------------------------------------------------- a chat keeps its agent


def _reply(model: str | None, ts: Any) -> dict[str, Any]:
    return {"role": "assistant", "model": model, "timestamp": ts, "content": "x"}


def _read(model_id: str) -> str | None:
    function_id, _, _ = model_id.partition(".")
    if function_id != "openclaw":
        return None
    got = mo.resolve_agent(model_id, "main", KNOWN)
    return None if got.keep else got.agent


@pytest.mark.parametrize(
    ("messages", "skip", "expected"),
    [
        ({}, None, None),
        (None, None, None),
        ({"m": _reply("openclaw.saffron", 5)}, "m", None),  # the reply being made is no history
        ({"a": _reply("openclaw.matcha", 10), "b": _reply("openclaw.saffron", 20)}, None, "matcha"),
        ({"a": _reply("openclaw.matcha", 30), "b": _reply("openclaw.saffron", 20)}, None, "saffron"),
        ({"a": _reply("gpt-4o", 1), "b": _reply("openclaw.saffron", 2)}, None, "saffron"),  # not owc's
        ({"a": _reply("openai.gpt-4o", 1), "b": _reply("openclaw.main~fake/x", 2)}, None, "main"),
        ({"a": _reply("openclaw.ghost", 1), "b": _reply("openclaw.matcha", 2)}, None, "matcha"),  # gone agent
        ({"a": _reply(None, 1), "u": {"role": "user", "model": "openclaw.saffron", "timestamp": 0}}, None, None),
        ({"a": _reply("openclaw.matcha", "x"), "b": _reply("openclaw.saffron", 3)}, None, "saffron"),
    ],
)
def test_the_chats_agent_is_its_first_reply_on_owcs_models(messages: Any, skip: str | None, expected: Any) -> None:
    assert rule.chat_agent(messages, _read, skip=skip) == expected


def test_a_reader_that_fails_names_no_agent() -> None:
    def boom(model_id: str) -> str | None:
        raise ValueError(model_id)

    assert rule.chat_agent({"a": _reply("openclaw.matcha", 1)}, boom) is None


def test_choose_keeps_the_chats_agent_and_says_so() -> None:
    assert rule.choose("saffron", None) == rule.Choice("saffron")
    assert rule.choose("saffron", "saffron") == rule.Choice("saffron")
    kept = rule.choose("saffron", "matcha", {"matcha": "Matcha", "saffron": "Saffron"})
    assert kept == rule.Choice(
        "matcha",
        keep_model=True,
        note="This chat stays with Matcha, its agent from the start: start a new chat to talk to Saffron.",
    )
    assert (
        rule.choose("x", "y").note == "This chat stays with y, its agent from the start: start a new chat to talk to x."
    )


def test_the_new_core_modules_are_pure() -> None:
    code = (
        "import sys, owc.protocol.agents, owc.rules.agents, owc.owui.models\n"
        "print([m for m in ('trio', 'asyncio', 'open_webui', 'sqlalchemy') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------- the simulator


async def test_the_simulator_answers_agents_list_in_the_measured_shape() -> None:
    from owc.sim import open_simulator
    from owc.sim.agents import TWO_AGENTS

    from rawclient import raw_client

    token = "sim-agents-" + uuid.uuid4().hex
    async with open_simulator(token=token) as sim:
        async with raw_client(sim.url, token, scopes=("operator.read",)) as client:
            one = await client.request("agents.list", {})
            assert one.ok and [a["id"] for a in one.payload["agents"]] == ["main"]
            assert "name" not in one.payload["agents"][0]
            sim.rpc.agents.configured = [copy.deepcopy(a) for a in reversed(TWO_AGENTS)]
            two = await client.request("agents.list", {})
            bad = await client.request("agents.list", {"x": 1})
    assert set(two.payload) == set(MEASURED)
    assert [a["id"] for a in two.payload["agents"]] == ["main", "matcha"]
    assert set(two.payload["agents"][1]) == set(MEASURED["agents"][1])
    assert two.payload["agents"][1]["identity"] == {
        k: v for k, v in MEASURED["agents"][1]["identity"].items() if k != "theme"
    }
    assert read_agents(two.payload).agents == (GatewayAgent("main"), MATCHA)
    assert not bad.ok and bad.error.code == "INVALID_REQUEST"
    assert bad.error.message == "invalid agents.list params: at root: unexpected property 'x'"  # measured


# ---------------------------------------------------------------------------------------------- the Pipe


def test_pipes_against_the_simulator_lists_its_second_agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A real ``pipes()`` (owc hosted on this loop, the simulator in its thread): the second agent is listed by its
    name after "OpenClaw"; with the whitelist valve naming nobody it is not; the roster is kept for when the Gateway
    cannot answer."""
    from owc.owui import process, trio_host
    from owc.sim.agents import TWO_AGENTS

    from owui.fake_surface import FakeOpenWebUI
    from owui.simthread import call, simulator_thread

    token = "owui-agents-" + uuid.uuid4().hex
    env = types.ModuleType("open_webui.env")
    env.DATABASE_URL = f"sqlite:///{tmp_path / 'webui.db'}"  # type: ignore[attr-defined]
    env.DATA_DIR = str(tmp_path / "data")  # type: ignore[attr-defined]
    package = types.ModuleType("open_webui")
    package.__path__ = []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "open_webui", package)
    monkeypatch.setitem(sys.modules, "open_webui.env", env)
    for name in ("OWC_GATEWAY_URL", "OWC_GATEWAY_TOKEN", "OWC_GATEWAY_TOKEN_FILE", "OWC_DEVICE_DIR"):
        monkeypatch.delenv(name, raising=False)
    from owc.store import ChatStore, make_engine

    store = ChatStore(make_engine(env.DATABASE_URL))
    store.create_tables()
    store.engine.dispose()

    with simulator_thread(token) as (sim, sim_token):
        call(sim_token, lambda: setattr(sim.rpc.agents, "configured", list(TWO_AGENTS)))

        def valves(**extra: Any) -> types.SimpleNamespace:
            return types.SimpleNamespace(
                GATEWAY_URL=sim.url, GATEWAY_TOKEN=token, DEVICE_DIR="off", AGENT_ID="", MODEL_WHITELIST="",
                MAX_MODELS=30, **extra,
            )  # fmt: skip

        async def body() -> None:
            runtime = await process.ensure_started(owui_pipe.settings_from(valves()), FakeOpenWebUI())
            try:
                await trio_host.process_host().run_in_trio(runtime.connected)
                listed = await owui_pipe.pipes(valves())
                assert listed[:2] == [
                    {"id": "main", "name": "OpenClaw"},
                    {"id": "matcha", "name": "\U0001f375 Matcha · OpenClaw"},
                ]
                assert all(separator_ok(e["id"]) for e in listed[2:])
                only = await owui_pipe.pipes(valves(AGENT_WHITELIST="saffron"))
                assert [e["id"] for e in only if "~" not in e["id"]] == ["main"]
                with_models = await owui_pipe.pipes(valves(AGENT_MODELS="matcha"))
                assert any(e["id"].startswith("matcha~") and "· Matcha · OpenClaw" in e["name"] for e in with_models)
                assert owui_pipe.gateway_agents(runtime).ids == ("main", "matcha")
                assert call(sim_token, lambda: sim.requests["agents.list"]) == 3
            finally:
                await process.shutdown()

        with asyncio.Runner() as runner:
            runner.run(body())


def separator_ok(sub_id: str) -> bool:
    """A Gateway model's entry of the Default entry's agent."""
    return sub_id.startswith("main~")


class _Host:
    """``TrioHost.run_in_trio`` for a test that has no Trio guest: the call runs on this test's own Trio loop."""

    async def run_in_trio(self, fn: Any, *args: Any) -> Any:
        return await fn(*args)


class _Client:
    def __init__(self, payload: Any) -> None:
        self.payload, self.calls = payload, 0

    async def request(self, method: str, params: Any) -> Any:
        assert (method, params) == ("agents.list", {})
        self.calls += 1
        return self.payload


async def _turn_on(store: Any, model_id: str, chat_id: str, message_id: str, whitelist: str = "") -> Any:
    valves = types.SimpleNamespace(AGENT_ID="", AGENT_WHITELIST=whitelist)
    body = {"model": model_id, "messages": [{"role": "user", "content": "hi"}]}
    turn = owui_pipe._turn_from(valves, body, {"id": "u1"}, {"chat_id": chat_id, "message_id": message_id})
    assert isinstance(turn, owui_pipe.Turn)
    return turn


async def test_a_turn_goes_to_the_picked_agent_and_a_chat_keeps_its_agent(tmp_path: Path) -> None:
    """``pipe._on_agent`` with a real store: a new chat on ``openclaw.matcha`` goes to matcha (its own default model,
    one ``agents.list`` first since this process had not listed agents); the chat's next message, picked on Saffron,
    stays with Matcha, the session's model untouched, and says so; a chat of the "OpenClaw" entry stays there."""
    from owc.store import open_store

    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        client = _Client(MEASURED)
        runtime = types.SimpleNamespace(client=client, keeper=types.SimpleNamespace(store=store))
        chat_id, m1, m2 = (str(uuid.uuid4()) for _ in range(3))
        history = {
            "currentId": m1,
            "messages": {"u": {"id": "u", "role": "user", "content": "hi", "timestamp": 1},
                         m1: {"id": m1, "role": "assistant", "model": "openclaw.matcha", "timestamp": 2}},
        }  # fmt: skip
        await store.create_chat(chat_id, "u1", chat={"id": chat_id, "title": "t", "history": history})

        first = await _turn_on(store, "openclaw.matcha", chat_id, m1)
        turn, note = await owui_pipe._on_agent(_Host(), runtime, first)
        assert (turn.agent_id, turn.model, note) == ("matcha", None, None)
        assert client.calls == 1 and owui_pipe.gateway_agents(runtime).ids == ("main", "matcha", "saffron")

        # The person switched the chat's model to Saffron: the chat stays with Matcha.
        switched = await _turn_on(store, "openclaw.saffron~fake/fake-alt", chat_id, m2)
        turn, note = await owui_pipe._on_agent(_Host(), runtime, switched)
        assert turn.agent_id == "matcha" and turn.model is KEEP_MODEL
        assert note == "This chat stays with Matcha, its agent from the start: start a new chat to talk to Saffron."
        assert client.calls == 1  # Saffron is known now: no second agents.list

        # Matcha's own models are Matcha's: a switch among them is a model switch on the same agent.
        same = await _turn_on(store, "openclaw.matcha~fake/fake-alt", chat_id, m2)
        turn, note = await owui_pipe._on_agent(_Host(), runtime, same)
        assert (turn.agent_id, turn.model, note) == ("matcha", "fake/fake-alt", None)

        # A chat of the "OpenClaw" entry (AGENT_ID's agent) switched to Matcha stays with it, said by its picker name.
        other, r1, r2 = (str(uuid.uuid4()) for _ in range(3))
        old = {"messages": {r1: {"id": r1, "role": "assistant", "model": "openclaw.main", "timestamp": 5}}}
        await store.create_chat(other, "u1", chat={"id": other, "title": "t", "history": old})
        turn, note = await owui_pipe._on_agent(_Host(), runtime, await _turn_on(store, "openclaw.matcha", other, r2))
        assert turn.agent_id == "main" and turn.model is KEEP_MODEL
        assert note == "This chat stays with OpenClaw, its agent from the start: start a new chat to talk to Matcha."

        # Whitelisted out, Matcha is no agent owc lists: the pick reads as before (AGENT_ID's session, model kept).
        turn, note = await owui_pipe._on_agent(
            _Host(), runtime, await _turn_on(store, "openclaw.matcha", str(uuid.uuid4()), r2, whitelist="saffron")
        )
        assert (turn.agent_id, turn.model, note) == ("main", KEEP_MODEL, None)


def test_every_valve_the_pipe_reads_is_one_an_admin_can_set() -> None:
    """The agents' valves were read by ``owc.owui.pipe`` but missing from the Function's ``Valves``: Open WebUI
    keeps only the fields its class has, so no admin could set them. Every valve name owc's Open WebUI side reads
    from the valves object must be a field of the installed Function's Valves."""
    import importlib.util
    import re

    root = Path(__file__).resolve().parents[1] / "owc" / "owui"
    spec = importlib.util.spec_from_file_location("openclaw_pipe_fn", root / "functions" / "openclaw_pipe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fields = set(module.Pipe.Valves.model_fields)
    read = set()
    for path in root.glob("*.py"):
        read |= set(re.findall(r'(?:_valve_text\(valves, |getattr\(valves, )"([A-Z_]+)"', path.read_text()))
    assert {"AGENT_WHITELIST", "AGENT_MODELS", "AGENT_ID"} <= read
    assert read <= fields, read - fields
    valves = module.Pipe.Valves(AGENT_WHITELIST="matcha, Saffron", AGENT_MODELS="matcha")
    assert (valves.AGENT_WHITELIST, valves.AGENT_MODELS) == ("matcha, Saffron", "matcha")
    assert module.Pipe.Valves().AGENT_WHITELIST == "" and module.Pipe.Valves().AGENT_MODELS == ""
