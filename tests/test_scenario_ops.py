"""The scenario language's issue-11 ops: what each does to the simulator and to owc, and the scenarios refused
before they play because they could never finish."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from owc import ids
from owc.protocol import parse_chat_history
from owc.render import output_from_transcript
from owc.sim import open_simulator
from owc.sim.play import open_owc_with_simulator, play_scenario
from owc.sim.scenario import ScenarioError, ScenarioPlayer, parse_scenario

from conftest import TOKEN
from rawclient import raw_client

ROOT = Path(__file__).resolve().parents[1]
CHAT = '{"op": "chat", "chat": "c"}\n'


# ---------------------------------------------------------------- refused before anything plays


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            '{"op": "connect", "deploy": "A"}\n{"op": "await_clients", "deploy": "B"}',
            "line 2: op 'await_clients' names deploy 'B', which is never connected",
        ),
        (
            '{"op": "connect", "deploy": "A"}\n{"op": "kill", "deploy": "A"}\n{"op": "wait_claimed", "run": "r",'
            ' "deploy": "A"}',
            "line 3: unknown run 'r'",
        ),
        (
            '{"op": "connect", "deploy": "A"}\n{"op": "kill", "deploy": "A"}\n{"op": "fail", "method": "x",'
            ' "deploy": "A"}',
            "line 3: op 'fail' names deploy 'A', which is not running here (killed)",
        ),
        (
            '{"op": "connect", "deploy": "A"}\n{"op": "await_clients", "count": 2}',
            "line 2: await_clients can never finish: it waits for 2 clients and 1 deploys run here",
        ),
        ('{"op": "kill", "deploy": "A"}\n{"op": "connect", "deploy": "B"}', "line 1: deploy 'A' is not running"),
        ('{"op": "connect", "deploy": "B"}\n{"op": "start", "deploy": "A"}', "line 2: deploy 'A' was never connected"),
        ('{"op": "connect", "deploy": "A"}\n{"op": "connect", "deploy": "A"}', "line 2: deploy 'A' is already running"),
        (
            CHAT + '{"op": "run", "chat": "c", "run": "r"}\n{"op": "text", "run": "r", "text": "x"}\n{"op": "wait"}',
            "line 4: wait can never finish: run 'r' never ends (it is driven (no steps) and has no 'end'",
        ),
        (
            CHAT + '{"op": "run", "chat": "c", "run": "r", "steps": [{"text": "x"}, {"hold": true}, {"end": "final"}]}'
            '\n{"op": "wait"}',
            "line 3: wait can never finish: run 'r' never ends (its steps hold, or never end)",
        ),
        (
            CHAT + '{"op": "run", "chat": "c", "run": "r", "steps": [{"text": "x"}]}\n{"op": "wait"}',
            "line 3: wait can never finish: run 'r' never ends",
        ),
        (
            CHAT + '{"op": "send", "chat": "c", "run": "r", "message": "SLOW"}\n{"op": "wait"}',
            "line 3: wait can never finish: run 'r' never ends (its message says SLOW",
        ),
        (
            CHAT + '{"op": "recovery", "chat": "c", "run": "rec", "steps": [{"hold": true}, {"end": "final"}]}\n'
            '{"op": "restart", "mode": "crash"}\n{"op": "wait"}',
            "line 4: wait can never finish: run 'rec' never ends",
        ),
        (
            CHAT + '{"op": "run", "chat": "c", "run": "b", "heartbeat": true}\n{"op": "wait_claimed", "run": "b"}',
            "line 3: wait_claimed can never finish: owc claims no message for run 'b' while it runs",
        ),
        (
            '{"op": "run", "key": "agent:main:main", "run": "m"}\n{"op": "wait_claimed", "run": "m"}',
            "line 2: wait_claimed can never finish",
        ),
        ('{"op": "await_held", "method": "chat.history"}', "line 1: await_held can never finish"),
        (
            '{"op": "stall", "method": "chat.history"}\n{"op": "heal"}\n{"op": "await_held", "method": "chat.history"}',
            "line 3: await_held can never finish",
        ),
        (CHAT + '{"op": "expect", "chat": "c", "run": "r"}', "line 2: op 'expect' needs exactly one of"),
        (CHAT + '{"op": "expect", "chat": "c"}', "line 2: expect says nothing"),
        (CHAT + '{"op": "expect", "chat": "c", "text": "x"}', "line 2: expect on a chat does not take text"),
        (CHAT + '{"op": "expect", "run": "r", "done": true}', "line 2: unknown run 'r'"),
        (CHAT + '{"op": "expect", "chat": "c", "count": "2"}', "line 2: expect count must be a number"),
        (CHAT + '{"op": "expect", "chat": "c", "messages": ["bot"]}', "line 2: each of 'messages' is a role"),
        (
            CHAT + '{"op": "owui_message", "chat": "c", "message": "m", "parent": "nope"}',
            "line 2: parent 'nope' is no message or run of this chat",
        ),
        (
            CHAT + '{"op": "owui_message", "chat": "c", "message": "m"}\n'
            '{"op": "owui_message", "chat": "c", "message": "m"}',
            "line 3: message name 'm' already used",
        ),
        (CHAT + '{"op": "owui_message", "chat": "c", "message": "m", "role": "tool"}', "line 2: role must be"),
        (CHAT + '{"op": "current", "chat": "c", "message": "m"}', "line 2: unknown message or run 'm'"),
        ('{"op": "chat", "chat": "c", "runtime": "docker"}', "line 1: runtime must be one of embedded, cli"),
        (CHAT + '{"op": "steer", "run": "p", "text": "x"}', "line 2: unknown run 'p'"),
        (CHAT + '{"op": "stop", "chat": "d"}', "line 2: unknown chat 'd'"),
        (
            CHAT + '{"op": "owui_message", "chat": "c", "message": "u"}\n'
            '{"op": "teardown", "chat": "c", "message": "u", "deploy": "owc"}',
            "line 3: teardown needs an assistant placeholder",
        ),
        (
            CHAT + '{"op": "connect", "deploy": "A"}\n{"op": "stub", "chat": "c", "message": "m"}\n'
            '{"op": "kill", "deploy": "A"}\n{"op": "teardown", "chat": "c", "message": "m", "deploy": "A"}',
            "line 5: deploy 'A' is not running",
        ),
    ],
)
def test_refused_before_playing(text: str, needle: str) -> None:
    with pytest.raises(ScenarioError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(text)


@pytest.mark.parametrize(
    "text",
    [
        # Each ends before its wait: an end, a restart, a stop of its chat, a release.
        CHAT + '{"op": "run", "chat": "c", "run": "r"}\n{"op": "end", "run": "r"}\n{"op": "wait"}',
        CHAT + '{"op": "run", "chat": "c", "run": "r"}\n{"op": "restart", "mode": "stop"}\n{"op": "wait"}',
        CHAT + '{"op": "send", "chat": "c", "run": "r", "message": "SLOW"}\n{"op": "stop", "chat": "c"}\n'
        '{"op": "wait"}',
        CHAT + '{"op": "run", "chat": "c", "run": "r", "steps": [{"hold": true}, {"end": "final"}]}\n'
        '{"op": "release", "run": "r"}\n{"op": "wait"}',
        # A recovery never started by a boot (a stop-mode restart) holds nothing.
        CHAT + '{"op": "recovery", "chat": "c", "run": "rec"}\n{"op": "restart", "mode": "stop"}\n{"op": "wait"}',
        # A bare simulator's clients are whoever connects: no deploy count to check.
        '{"op": "await_clients", "count": 3}\n{"op": "drop", "count": 1, "deploy": "anyone"}',
    ],
)
def test_scenarios_that_finish_are_accepted(text: str) -> None:
    parse_scenario(text)


def test_through_owc_the_one_deploy_is_owc() -> None:
    parse_scenario('{"op": "await_clients", "deploy": "owc"}', through_owc=True)
    with pytest.raises(ScenarioError, match="line 1: await_clients can never finish"):
        parse_scenario('{"op": "await_clients", "count": 2}', through_owc=True)
    with pytest.raises(ScenarioError, match="names deploy 'A', which is never connected"):
        parse_scenario('{"op": "await_clients", "deploy": "A"}', through_owc=True)


def test_shipped_scenarios_parse_for_owc() -> None:
    for path in sorted((ROOT / "scenarios").glob("*.jsonl")) + [ROOT / "owc" / "demo.jsonl"]:
        parse_scenario(path.read_text(), through_owc=True)


# ---------------------------------------------------------------- the simulator's side


async def test_a_stalled_request_is_answered_at_the_heal(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        sim.start_run("agent:main:main", "r1").text("Said before the stall.").end()
        sim.stall_requests("chat.history")
        req = await client.send("chat.history", {"sessionKey": "agent:main:main"})
        await sim.wait_for(lambda: sim.requests["chat.history"] == 1)
        with trio.move_on_after(60):
            await client.response(req)
            pytest.fail("a stalled request was answered before the heal")
        sim.start_run("agent:main:main", "r2").text("Said during the stall.").end()
        sim.fail_requests()  # heal
        response = await client.response(req)
        texts = [m["content"] for m in response.payload["messages"] if m["role"] == "assistant"]
        assert [t[0]["text"] for t in texts] == ["Said before the stall.", "Said during the stall."]  # built late
        assert sim.requests["chat.history"] == 1  # counted once, when it arrived


async def test_a_timed_stall_answers_each_request_after_its_seconds(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim, raw_client(sim.url, TOKEN) as client:
        sim.stall_requests("chat.history", seconds=5)
        start = trio.current_time()
        response = await client.request("chat.history", {"sessionKey": "agent:main:main"})
        assert response.ok and trio.current_time() - start == pytest.approx(5)
        listed = await client.request("sessions.list", {})  # another method is not held
        assert listed.ok and trio.current_time() - start == pytest.approx(5)


async def test_a_named_recovery_holds_through_the_reconnect_and_is_released(autojump_clock) -> None:
    text = (
        CHAT + '{"op": "await_clients"}\n{"op": "run", "chat": "c", "run": "cut"}\n'
        '{"op": "text", "run": "cut", "text": "Working."}\n'
        '{"op": "recovery", "chat": "c", "run": "rec", "id": "rec-1", "steps": [{"text": "Resumed."}, {"hold": true},'
        ' {"text": " Done."}, {"end": "final"}]}\n'
        '{"op": "restart", "mode": "crash", "down": 1}\n{"op": "await_clients"}\n'
    )
    async with open_simulator(token=TOKEN) as sim:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_subscribe_forever, sim.url)
            player = ScenarioPlayer(sim)
            await player.play(parse_scenario(text))
            recovery = sim.runs["rec-1"]
            assert recovery.state == "active" and recovery.origin == "recovery" and recovery.text == "Resumed."
            sim.handle("rec-1").release()
            await sim.wait_for(sim.quiescent)
            nursery.cancel_scope.cancel()
        assert recovery.terminal == "final" and recovery.text == "Resumed. Done."
        user = [m for m in sim.sessions[recovery.key].transcript if m.get("idempotencyKey") == "rec-1:user"]
        assert user and user[0]["provenance"]["sourceTool"] == "main_session_restart_recovery"


async def _subscribe_forever(url: str) -> None:
    while True:
        try:
            async with raw_client(url, TOKEN) as client:
                await client.request("sessions.subscribe", {})
                while True:
                    await client.event()
        except Exception:  # closed by the restart, or refused while it boots: connect again
            await trio.sleep(0.5)


async def test_a_driven_recovery_is_played_op_by_op(autojump_clock) -> None:
    text = (
        CHAT + '{"op": "await_clients"}\n{"op": "run", "chat": "c", "run": "cut"}\n'
        '{"op": "text", "run": "cut", "text": "Working."}\n{"op": "recovery", "chat": "c", "run": "rec"}\n'
        '{"op": "restart", "mode": "restart"}\n{"op": "text", "run": "rec", "text": "Driven."}\n'
        '{"op": "end", "run": "rec"}\n{"op": "wait"}\n'
    )
    async with open_simulator(token=TOKEN) as sim:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_subscribe_forever, sim.url)
            player = ScenarioPlayer(sim)
            await player.play(parse_scenario(text))
            nursery.cancel_scope.cancel()
        rec = sim.runs[player.run_ids["rec"]]
        assert rec.origin == "recovery" and rec.terminal == "final" and rec.text == "Driven."


async def test_a_steered_completion_is_part_of_the_parent_run(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        key = "agent:main:main"
        parent = sim.start_run(key, "parent").text("Spawning.")
        parent.steer("[Subagent completed] 42", {"kind": "inter_session", "sourceTool": "subagent_announce"})
        parent.text("It says 42.").end()
        inbound, *transcript = sim.sessions[key].transcript  # the cron job's own prompt, then the run
        assert inbound["role"] == "user" and inbound["idempotencyKey"] != "parent:user"
        assert [m["role"] for m in transcript] == ["assistant", "user", "assistant"]
        assert transcript[1]["provenance"]["sourceTool"] == "subagent_announce"
        assert "idempotencyKey" not in transcript[1]  # it starts no run
        assert list(sim.runs) == ["parent"]
        history = parse_chat_history({"sessionKey": key, "messages": [inbound, *transcript]})
        output = output_from_transcript(history, "parent")
        assert output is not None
        assert [i["content"][0]["text"] for i in output if i["type"] == "message"] == ["Spawning.", "It says 42."]


async def test_the_cli_runtime_per_chat_and_per_run(autojump_clock) -> None:
    async with open_simulator(token=TOKEN) as sim:
        player = ScenarioPlayer(sim)
        await player.play(
            parse_scenario(
                '{"op": "chat", "chat": "cli", "runtime": "cli"}\n{"op": "chat", "chat": "emb"}\n'
                '{"op": "run", "chat": "cli", "run": "a"}\n{"op": "run", "chat": "emb", "run": "b"}\n'
                '{"op": "run", "chat": "emb", "run": "c", "runtime": "cli"}\n'
            )
        )
        a, b = (sim.runs[player.run_ids[n]] for n in "ab")
        assert a.cli_runtime and a.hide_ids and not b.cli_runtime
        assert sim.sessions[a.key].row()["activeRunIds"] is None  # listed active without its run ids
        player.runs["a"].text("x").end()
        player.runs["b"].text("x").end()  # c, queued behind b, begins
        player.runs["c"].text("x").end()
        closing = {
            m.get("idempotencyKey") for s in sim.sessions.values() for m in s.transcript if m["role"] == "assistant"
        }
        assert closing == {f"cli-assistant:{player.run_ids['a']}", None, f"cli-assistant:{player.run_ids['c']}"}


# ---------------------------------------------------------------- through owc


async def test_deploys_in_one_process_share_a_writer_registry(tmp_path: Path) -> None:
    async with open_owc_with_simulator(f"sqlite:///{tmp_path / 'p.db'}") as (_, deployments):
        await deployments.connect("old", process="worker")
        await deployments.connect("new", process="worker")
        await deployments.connect("alone")
        registry = {name: rt.keeper.registry for name, rt in deployments.runtimes.items()}
        assert registry["old"] is registry["new"] and registry["alone"] is not registry["old"]
        await deployments.kill("old")
        await deployments.start("old")  # "new" keeps the worker alive: it joins it again
        assert deployments.runtimes["old"].keeper.registry is registry["new"]
        await deployments.kill("alone")
        await deployments.start("alone")  # nothing kept its process: a new one
        assert deployments.runtimes["alone"].keeper.registry is not registry["alone"]


async def test_a_send_owned_by_a_deploy_goes_out_on_its_connection(tmp_path: Path) -> None:
    text = (
        CHAT + '{"op": "connect", "deploy": "A"}\n{"op": "connect", "deploy": "B"}\n'
        '{"op": "send", "chat": "c", "run": "r", "deploy": "B", "message": "USE_TOOL now"}\n{"op": "wait"}\n'
        '{"op": "expect", "run": "r", "cards": 1, "done": true}\n'
    )
    async with open_owc_with_simulator(f"sqlite:///{tmp_path / 's.db'}") as (sim, deployments):
        player = ScenarioPlayer(sim, deployments)
        await player.play(parse_scenario(text, through_owc=True))
        (b,) = [c for c in sim.conns.values() if c.instance_id == "B"]
        run = sim.runs[player.run_ids["r"]]
        assert run.owner == b.conn_id and run.origin == "chat.send"
        assert player.failures == []


async def test_stop_aborts_the_run_owc_streams(tmp_path: Path) -> None:
    played = await play_scenario(
        (ROOT / "scenarios" / "processes-and-stop.jsonl").read_text(), f"sqlite:///{tmp_path / 'x.db'}"
    )
    stopped = played.player.sim.runs[played.player.run_ids["stopped"]]
    assert stopped.terminal == "aborted" and played.player.sim.requests["chat.abort"] >= 1
    assert played.failures == []


async def test_expectations_that_fail_are_reported_with_their_line(tmp_path: Path) -> None:
    text = (
        CHAT + '{"op": "run", "chat": "c", "run": "r", "steps": [{"text": "Hello."}, {"end": "final"}]}\n'
        '{"op": "expect", "run": "r", "text": "Checked at the wait."}\n{"op": "wait"}\n'
        '{"op": "expect", "run": "r", "text": "Goodbye.", "cards": 2}\n'
        '{"op": "expect", "chat": "c", "count": 1, "messages": ["assistant"]}\n'
        '{"op": "expect", "chat": "c", "messages": ["user", "assistant"]}\n'
    )
    played = await play_scenario(text, f"sqlite:///{tmp_path / 'e.db'}")
    assert played.failures == [
        "line 3: expect: run 'r': text 'Hello.', expected 'Checked at the wait.'",
        "line 5: expect: run 'r': text 'Hello.', expected 'Goodbye.'",
        "line 5: expect: run 'r': 0 tool cards, expected 2",
        "line 7: expect: chat 'c' shows 1 messages, expected 2: [\"assistant:'Hello.'\"]",
        "line 7: expect: chat 'c' message 1: role 'assistant', expected 'user'",
    ]


async def test_owui_messages_a_branch_and_current_in_the_database(tmp_path: Path) -> None:
    played = await play_scenario(
        (ROOT / "scenarios" / "owui-branches.jsonl").read_text(), f"sqlite:///{tmp_path / 'b.db'}"
    )
    assert played.failures == []
    player = played.player
    messages = played.chats["c"]
    roots = sorted(m["content"] for m in messages.values() if m.get("parentId") is None)
    assert roots == ["Hi again", "Hi there"]  # the edit made a second root: a branch
    placeholder = messages[player.stubs["placeholder"]]
    assert placeholder["done"] and "openclaw_run" in placeholder["meta"]
    key = player.chats["c"].session_key
    assert messages[ids.message_id(key, player.run_ids["on-the-branch"])]["parentId"] == player.stubs["hi-edited"]


def test_owc_scenario_run_exits_1_on_a_failed_expectation(tmp_path: Path) -> None:
    scenario = tmp_path / "e.jsonl"
    scenario.write_text(
        CHAT + '{"op": "run", "chat": "c", "run": "r", "steps": [{"text": "Hello."}, {"end": "final"}]}\n'
        '{"op": "wait"}\n{"op": "expect", "run": "r", "text": "Bye."}\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "owc", "scenario", "run", str(scenario), "--db", f"sqlite:///{tmp_path / 'x.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr[-2000:]
    assert "EXPECTED line 4: expect: run 'r': text 'Hello.', expected 'Bye.'" in out.stderr
    assert "1 expectations failed" in out.stdout


async def test_a_run_started_during_a_restart_starts_the_boots_delayed_recovery_first(autojump_clock) -> None:
    """``recovery_delay`` (issue 24 item 4): the boot decides what it recovers; a run started on the cut run's key
    before the recovery begins starts the recovery at once and queues behind it, as the real Gateway 2026.9.6 does
    (the admission dispatches the pending recovery: ``tests/test_realgw_cuts.py``; before, the simulator ran the
    newer run first, which no Gateway does: fuzz seed 30151), and ``wait`` waits for both."""
    text = (
        CHAT + '{"op": "await_clients"}\n{"op": "run", "chat": "c", "run": "cut", "user_text": "Go."}\n'
        '{"op": "text", "run": "cut", "text": "Working."}\n'
        '{"op": "restart", "mode": "restart", "recovery_delay": 3}\n'
        '{"op": "run", "chat": "c", "run": "newer", "user_text": "Next?",'
        ' "steps": [{"text": "Newer."}, {"end": "final"}]}\n'
        '{"op": "wait"}\n'
    )
    async with open_simulator(token=TOKEN) as sim:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_subscribe_forever, sim.url)
            player = ScenarioPlayer(sim)
            await player.play(parse_scenario(text))
            nursery.cancel_scope.cancel()
        cut, newer = sim.runs[player.run_ids["cut"]], sim.runs[player.run_ids["newer"]]
        (recovery,) = [r for r in sim.runs.values() if r.origin == "recovery"]
        assert recovery.recovers == cut.run_id and cut.cut_by == "restart"
        assert recovery.state == "ended" and newer.terminal == "final"
        session = sim.sessions[cut.key]
        users = [m.get("idempotencyKey") for m in session.transcript if m.get("role") == "user"]
        assert users == [f"{cut.run_id}:user", f"{recovery.run_id}:user", f"{newer.run_id}:user"], users


async def test_a_teardown_saves_the_reply_done_and_its_deploy_dies(tmp_path: Path) -> None:
    """``teardown`` (issue 24 item 1): Open WebUI's cancel path saves the placeholder done as the tab showed it,
    then the process dies before the handover; the run goes on at the Gateway."""
    text = (
        CHAT + '{"op": "connect", "deploy": "owc"}\n{"op": "owui_message", "chat": "c", "message": "u"}\n'
        '{"op": "owui_message", "chat": "c", "message": "m", "role": "assistant"}\n'
        '{"op": "run", "chat": "c", "run": "r", "reply_to": "m"}\n{"op": "text", "run": "r", "text": "First part,"}\n'
        '{"op": "wait_claimed", "run": "r"}\n'
        '{"op": "teardown", "chat": "c", "message": "m", "deploy": "owc", "text": "First part,"}\n'
        '{"op": "text", "run": "r", "text": " and the rest."}\n{"op": "end", "run": "r"}\n'
        '{"op": "start", "deploy": "owc"}\n{"op": "wait"}\n'
    )
    played = await play_scenario(text, f"sqlite:///{tmp_path / 'x.db'}")
    sim = played.player.sim
    assert [d for d, _ in sim.deaths] == ["owc"]  # the teardown's death, for the oracle's "streamed" rule
    assert sim.runs[played.player.run_ids["r"]].terminal == "final"
    (message,) = [m for m in played.chats["c"].values() if m.get("role") == "assistant"]
    assert message["done"] is True and message["content"].startswith("First part,")  # saved by the cancel path
