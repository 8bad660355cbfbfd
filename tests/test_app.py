"""owc end to end through its commands: every shipped scenario played through owc meets the design's
invariants (``tests/oracle.py``); ``owc demo``, ``owc scenario run`` and ``owc run`` work as commands."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from owc import ids
from owc.sim import open_simulator
from owc.sim.play import Played, play_scenario
from owc.store import ChatStore, make_engine

from conftest import TOKEN
from oracle import check

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.jsonl")) + [ROOT / "owc" / "demo.jsonl"]


def violations(played: Played) -> list[str]:
    chats = {spec.chat_id: (name, played.chats[name]) for name, spec in played.player.chats.items()}
    return check(played.player.sim, chats)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_scenario_through_owc_meets_the_invariants(path: Path, tmp_path: Path) -> None:
    played = await play_scenario(path.read_text(), f"sqlite:///{tmp_path / 'webui.db'}")
    assert violations(played) == []
    assert played.unfinished == [] and played.missing == []  # owc's own report agrees
    assert played.failures == []  # and so do the scenario's own expectations
    assert played.claims >= 1 and played.finalized >= 1
    shown = [
        m for messages in played.chats.values() for m in messages.values() if (m.get("meta") or {}).get("openclaw_run")
    ]
    assert len(shown) == len({m["meta"]["openclaw_run"] for m in shown})  # one message per shown run


async def test_demo_scenario_contents(tmp_path: Path) -> None:
    played = await play_scenario((ROOT / "owc" / "demo.jsonl").read_text(), f"sqlite:///{tmp_path / 'demo.db'}")
    ops = played.chats["ops-room"]
    runs = played.player.run_ids
    key = played.player.chats["ops-room"].session_key
    wake = ops[ids.message_id(key, runs["cron-wake"])]
    assert wake["done"] and len([i for i in wake["output"] if i["type"] == "function_call"]) == 2
    first, second = ids.message_id(key, runs["followup-1"]), ids.message_id(key, runs["followup-2"])
    assert ops[second]["parentId"] == first and ops[first]["parentId"] == ids.message_id(key, runs["cron-wake"])
    assert ids.message_id(key, runs["heartbeat"]) not in ops  # it only acknowledged (HEARTBEAT_OK)
    alert = ops[ids.message_id(key, runs["heartbeat-alert"])]  # it spoke: shown, after the turns before it
    assert alert["done"] and alert["content"] == "Heads up: /data grew back to 85% in the last hour."
    assert alert["parentId"] == second
    research = played.chats["research"]
    rkey = played.player.chats["research"].session_key
    assert research[ids.message_id(rkey, runs["after-gap"])]["content"] == "Weekly digest: nothing new."
    assert len(research) == 2  # the announce and the post-gap digest; the sub-agent's own run shows nowhere


def test_owc_demo_command(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "owc", "demo", "--db", str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (
        "every ended run's message is finished" in out.stdout
        and "chat 'ops-room'" in out.stdout
        and "[2 tool cards]" in out.stdout
    )
    assert (tmp_path / "demo.db").exists()


def test_owc_scenario_run_command(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "owc",
            "scenario",
            "run",
            str(ROOT / "scenarios" / "agent-turns.jsonl"),
            "--db",
            db,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "0 unfinished" in ok.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op": "text", "run": "nope", "text": "x"}\n')
    refused = subprocess.run(
        [sys.executable, "-m", "owc", "scenario", "run", str(bad), "--db", db],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "line 1: unknown run 'nope'" in refused.stderr


async def test_owc_run_bridges_a_gateway_until_interrupted(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    db = tmp_path / "webui.db"
    store = ChatStore(make_engine(f"sqlite:///{db}"))
    store.create_tables()
    chat_id = "3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"
    store.create_chat(chat_id, "alice")
    key = ids.session_key("main", "alice", chat_id)
    async with open_simulator(token=TOKEN) as sim:
        proc = await trio.lowlevel.open_process(
            [
                sys.executable, "-m", "owc", "run", "--gateway", sim.url, "--token-file", str(token_file),
                "--db", f"sqlite:///{db}", "--instance", "cli",
            ],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            with trio.fail_after(60):
                await sim.wait_for(lambda: any(c.instance_id == "cli" and c.subscribed for c in sim.conns.values()))
                run = sim.start_run(key, "via-cli").text("Written by owc run.")
                run.end()
                await sim.wait_for(lambda: sim.requests["chat.history"] >= 1)  # owc is finalizing
        finally:
            # Ctrl-C now: a run that has ended is still finalized (shielded) before owc exits.
            proc.send_signal(signal.SIGINT)
            with trio.fail_after(30):
                await proc.wait()
        stderr = (await proc.stderr.receive_some(1 << 20)).decode() if proc.stderr else ""
    assert proc.returncode == 0, stderr
    assert "owc stopping (SIGINT)" in stderr and TOKEN not in stderr
    message = store.read_chat(chat_id)["history"]["messages"][ids.message_id(key, "via-cli")]
    assert message["content"] == "Written by owc run."


async def test_deploys_and_faults_scenario_contents(tmp_path: Path) -> None:
    played = await play_scenario(
        (ROOT / "scenarios" / "deploys-and-faults.jsonl").read_text(), f"sqlite:///{tmp_path / 'f.db'}"
    )
    assert violations(played) == []
    chat = played.chats["f"]
    key = played.player.chats["f"].session_key
    runs = played.player.run_ids

    def message(run: str) -> dict:
        return chat[ids.message_id(key, runs[run])]

    survivor = message("outlives-a-deploy")
    assert survivor["done"] and survivor["content"] == "Begun while both deploys are up. Finished after one died."
    failed = message("tool-fails")
    assert failed["done"] and failed["error"] == {"content": "the deploy tool failed"}
    (call_output,) = [i for i in failed["output"] if i["type"] == "function_call_output"]
    assert "permission denied" in str(call_output["output"])
    assert message("yields")["done"] and message("yields")["content"] == "Waiting for the sub-agents."
    assert message("after-slow")["content"] == "One deploy was too slow; the other wrote this."
    # One chain, in run order: never siblings.
    order = ["outlives-a-deploy", "tool-fails", "yields", "after-slow"]
    for before, after in zip(order, order[1:]):
        assert message(after)["parentId"] == message(before)["id"]
    # Each deploy is a process. Four claims, one per run. A process standing by at a run's end finishes the
    # message with a conditional write if it is not done yet, so a run may be written twice (the same
    # transcript both times): the survivor of the killed deploy is written only that way.
    assert played.claims == 4 and 4 <= played.finalized <= 8


def test_an_interrupted_scenario_run_exits_130(tmp_path: Path) -> None:
    """Ctrl-C cuts a scenario short: the command says so in its exit code (128 + SIGINT), not success."""
    scenario = tmp_path / "long.jsonl"
    scenario.write_text('{"op": "chat", "chat": "c"}\n{"op": "sleep", "seconds": 3600}\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "owc", "scenario", "run", str(scenario), "--db", f"sqlite:///{tmp_path / 'x.db'}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "line 2: sleep" in line:
                break
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 128 + signal.SIGINT
    finally:
        proc.kill()
