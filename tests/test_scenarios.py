"""The scenario language: parsing errors name the line; every shipped scenario plays against the simulator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio
from trio_websocket import ConnectionClosed

from owc import ids
from owc.protocol import parse_chat_history
from owc.sim import open_simulator
from owc.sim.scenario import SCHEMA, ChatSpec, ScenarioError, ScenarioPlayer, parse_scenario, play_file

from conftest import TOKEN
from rawclient import Refused, raw_client

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.jsonl"))
#: Scenarios whose ops need owc itself (its deploys, the database's placeholders, its claims) play only through
#: owc (tests/test_app.py); so do those that wait for owc's requests (``await_held``: this file's client sends
#: none).
HOST_OPS = ("connect", "kill", "start", "stub", "wait_claimed", "owui_message", "current", "stop", "await_held")
SIM_SCENARIOS = [p for p in SCENARIOS if not any(op.op in HOST_OPS for op in parse_scenario(p.read_text()))]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"op": "chat"}', "line 1: op 'chat' needs chat"),
        ('\n\n{"op": "nope"}', "line 3: unknown op 'nope'"),
        ("[1]", "line 1: each line must be a JSON object"),
        ('{"op": "chat", "chat": "c", "colour": 1}', "line 1: op 'chat' does not take colour"),
        ('{"op": "run", "run": "r", "chat": "missing"}', "line 1: unknown chat 'missing'"),
        (
            '{"op": "chat", "chat": "c"}\n{"op": "run", "run": "r"}',
            "line 2: op 'run' needs exactly one of 'chat' or 'key'",
        ),
        ('{"op": "text", "run": "ghost", "text": "x"}', "line 1: unknown run 'ghost'"),
        ('{"op": "restart", "mode": "reboot"}', "line 1: restart mode must be one of"),
        (
            '{"op": "chat", "chat": "c"}\n{"op": "run", "run": "r", "chat": "c"}\n'
            '{"op": "end", "run": "r", "state": "done"}',
            "line 3: end state must be one of",
        ),
        (
            '{"op": "chat", "chat": "c"}\n{"op": "run", "run": "r", "chat": "c"}\n'
            '{"op": "run", "run": "r", "chat": "c"}',
            "line 3: run 'r' already started",
        ),
        ("{not json", "line 1: not valid JSON"),
    ],
)
def test_parse_errors_name_the_line(text: str, needle: str) -> None:
    with pytest.raises(ScenarioError, match=needle):
        parse_scenario(text)


def test_comments_and_blank_lines() -> None:
    ops = parse_scenario('# a comment\n\n{"op": "wait"}\n  # indented comment\n')
    assert [(o.line, o.op) for o in ops] == [(3, "wait")]


async def test_host_ops_need_owc() -> None:
    async with open_simulator(token=TOKEN) as sim:
        with pytest.raises(ScenarioError, match="line 1: op 'connect' needs owc itself"):
            await play_file(sim, '{"op": "connect", "deploy": "A"}')


async def _subscriber(sim_url: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """A client that stays subscribed across restarts, as owc will: reconnect after every close."""
    started = False
    while True:
        try:
            async with raw_client(sim_url, TOKEN) as client:
                await client.request("sessions.subscribe", {})
                if not started:
                    started = True
                    task_status.started()
                while True:
                    await client.event()  # read everything, as a live client does
        except (ConnectionClosed, Refused):
            await trio.sleep(0.5)


async def _play_subscribed(sim, text: str):
    """Play a scenario while a client stays subscribed (and reconnects across restarts), as owc would."""
    async with trio.open_nursery() as nursery:
        await nursery.start(_subscriber, sim.url)
        player = await play_file(sim, text)
        nursery.cancel_scope.cancel()
    return player


@pytest.mark.parametrize("path", SIM_SCENARIOS, ids=[p.stem for p in SIM_SCENARIOS])
async def test_shipped_scenario_plays(path: Path, autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        player = await _play_subscribed(sim, path.read_text())
        assert sim.quiescent()
        for name, run_id in player.run_ids.items():
            run = sim.runs.get(run_id)
            # Runs cut by a crash end without a terminal; every other run ended.
            assert run is not None and run.state == "ended", name
        for chat in player.chats.values():
            assert ids.parse_session_key(chat.session_key) == ids.SessionRef(chat.agent_id, chat.user_id, chat.chat_id)
            assert sim.sessions[chat.session_key].active is None


async def test_restart_modes_scenario_rows(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        player = await _play_subscribed(sim, (ROOT / "scenarios" / "restart-modes.jsonl").read_text())
        session = sim.sessions[player.chats["r"].session_key]
        history = parse_chat_history({"sessionKey": session.key, "messages": session.transcript})
        recovered = [m for m in history.messages if m.is_restart_recovery_turn]
        # The restart, the stop past its drain (measured on 2026.9.6: a restart's abort) and the crash; not the
        # container stop (its row failed: owc resumes that one).
        assert len(recovered) == 3
        errors = [
            m
            for m in history.messages
            if m.role == "assistant" and m.assistant_run_id == player.run_ids["cut-by-container"]
        ]
        assert errors and errors[0].tool_calls
        assert sim.boots == 5


def test_every_op_is_documented() -> None:
    doc = (ROOT / "docs" / "scenarios.md").read_text()
    for op in SCHEMA:
        assert f"`{op}`" in doc, op
    for path in SCENARIOS:
        assert path.name in doc, path.name


async def test_agent_turns_scenario_transcripts(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        player = await _play_subscribed(sim, (ROOT / "scenarios" / "agent-turns.jsonl").read_text())
        ops = player.chats["ops"].session_key
        runs = [m.get("__openclaw", {}).get("runId") for m in sim.sessions[ops].transcript if m["role"] == "assistant"]
        wake = player.run_ids["cron-wake"]
        assert runs.count(wake) == 3  # text+call, call, closing text
        assert sim.sessions[ops].last_run_id == player.run_ids["beat"]
        assert "agent:main:subagent:3b1f2c4d" in sim.sessions


class RecordingHost:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def create_chat(self, chat: ChatSpec) -> None:
        self.calls.append(("chat", chat.session_key))

    async def connect(self, deploy: str) -> None:
        self.calls.append(("connect", deploy))

    async def kill(self, deploy: str) -> None:
        self.calls.append(("kill", deploy))

    async def start(self, deploy: str) -> None:
        self.calls.append(("start", deploy))

    async def settled(self) -> None:
        self.calls.append(("settled", ""))


async def test_host_ops_reach_the_host() -> None:
    text = "\n".join(
        [
            '{"op": "chat", "chat": "c", "user": "u1", "id": "3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"}',
            '{"op": "connect", "deploy": "A"}',
            '{"op": "kill", "deploy": "A"}',
            '{"op": "start", "deploy": "A"}',
            '{"op": "wait"}',
        ]
    )
    host = RecordingHost()
    async with open_simulator(token=TOKEN) as sim:
        player = ScenarioPlayer(sim, host)
        await player.play(parse_scenario(text))
    key = "agent:main:openwebui-u1-3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"
    assert host.calls == [("chat", key), ("connect", "A"), ("kill", "A"), ("start", "A"), ("settled", "")]


def test_owc_sim_cli_plays_a_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "s.jsonl"
    scenario.write_text(
        '{"op": "chat", "chat": "c"}\n'
        '{"op": "run", "chat": "c", "run": "r", "steps": [{"text": "hi"}, {"end": "final"}]}\n{"op": "wait"}\n'
    )
    token = tmp_path / "token"
    token.write_text("cli-token\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "owc",
            "sim",
            "--port",
            "0",
            "--token-file",
            str(token),
            "--scenario",
            str(scenario),
            "--exit-after-scenario",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "owc sim listening on ws://127.0.0.1:" in out.stdout and "scenario played" in out.stdout
    assert "cli-token" not in out.stdout + out.stderr


def test_owc_sim_cli_refuses_a_bad_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.jsonl"
    scenario.write_text('{"op": "explode"}\n')
    out = subprocess.run(
        [sys.executable, "-m", "owc", "sim", "--port", "0", "--token", "t", "--scenario", str(scenario)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "line 1: unknown op 'explode'" in out.stderr
