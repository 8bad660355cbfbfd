"""Interrupted runs (issue 14; seed 000 section 2.7 and case 5): the owner rule, the resume budget and link rule E,
played through owc against the simulator's four restart modes. One continuation, into the same message, never
two; every cut run's message ends finished once its continuation (or nobody's) is over."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

from owc import ids
from owc.render import output_text
from owc.render.seam import RECOVERED, RESUMED, SEAM_TEXTS
from owc.rules.lifecycle import State
from owc.rules.owner import BUDGET_NOTE, MAX_RESUMES, NEWER_RUN_NOTE, RESUME_DIRECTIVE
from owc.sim.script import End, Hold, Text, Tool
from owc.store import TrioChatStore

from fuzzing import PLAY_BOUND_S, virtual_time
from harness import open_env


@pytest.fixture(autouse=True)
def _clock(mock_clock):
    """Trio's clock, moved only by idleness (a restart's downtime and the reconnect backoff cost no real time); it
    jumps only after 5 s of real idleness, never while a database thread works (threads do not count as busy)."""
    mock_clock.autojump_threshold = 5
    return mock_clock


#: The seams a continued message shows (issue 25, item 3): before a Gateway recovery's part, before owc's resume's.
GW = SEAM_TEXTS[RECOVERED]
OWC = SEAM_TEXTS[RESUMED]

EXIT_143 = "Claude Code process exited with code 143"
EXIT_137 = "Claude Code process exited with code 137"


def resume_runs(env: Any) -> list[str]:
    return [
        run_id for run_id in env.sim.runs if (ids.parse_run_id(run_id) or ids.RunRef("", "", "", "")).kind == "resume"
    ]


def recoveries(env: Any) -> list[str]:
    return [run.run_id for run in env.sim.runs.values() if run.origin == "recovery"]


async def _cut_run(env: Any, key: str, run_id: str = "S") -> Any:
    run = env.sim.start_run(key, run_id, user_text="Do the long job")
    run.text("Working on the first half.")
    keeper = env.keepers["A"]
    await keeper.until(lambda: keeper.totals()[0] >= 1)  # its message is claimed and streaming
    return run


async def test_a_crash_is_recovered_by_the_gateway_into_the_same_message_with_no_resume(tmp_path) -> None:
    """CrashDoubleContinuationTest: the Gateway recovers a crash-cut run (its row stays running); owc sends no resume
    and the recovery writes into the cut run's message, after what it showed."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.recovery = lambda k, source: [Text("Picked up after the crash."), End()]
        await _cut_run(env, key)
        await env.sim.restart("crash")
        await env.settled()
        m = ids.message_id(key, "S")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}, "the recovery has no message of its own"
        assert messages[m]["done"] is True
        assert messages[m]["content"] == f"Working on the first half.\n{GW}\nPicked up after the crash."
        assert resume_runs(env) == [] and len(recoveries(env)) == 1
        assert messages[m]["meta"]["openclaw_chain"] == ["S", recoveries(env)[0]]
        assert env.illegal() == []


async def test_a_restart_mode_abort_keeps_the_message_open_until_the_recovery_links(tmp_path) -> None:
    """Row 1: ``stopReason: "restart"`` is not a finalize. M stays ``done: false`` across the restart, and the
    recovery (held running after the boot) streams into it live; it is finished at the recovery's end."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        # It holds at once (so owc is back before it says anything), then speaks, then holds again.
        env.sim.plan_recovery(key, "R1", [Hold(), Text("Recovering now."), Hold(), Text(" Done."), End()])
        await _cut_run(env, key)
        m = ids.message_id(key, "S")
        await env.sim.restart("restart")
        keeper = env.keepers["A"]
        await env.until(lambda: any(r.run_id == "R1" and r.message_id == m for r in keeper.ledger.unsettled()))
        env.sim.handle("R1").release()
        # The recovery streams into M live, after what S showed (it holds again: only a live writer shows this).
        await env.emitter.until(lambda: "Recovering now." in str(env.emitter.streams.get((chat_id, m))))
        assert "Working on the first half." in str(env.emitter.streams[(chat_id, m)])
        kept = (await env.messages(chat_id))[m]
        assert kept["done"] is False and kept["content"].startswith("Working on the first half.")
        finals = [e for e in env.emitter.of(m, "chat:completion") if e.event["data"].get("done")]
        assert finals == [], "nothing finalized it yet"
        env.sim.handle("R1").release()
        await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True
        assert final["content"] == f"Working on the first half.\n{GW}\nRecovering now. Done."
        assert ids.message_id(key, "R1") not in await env.messages(chat_id)
        assert resume_runs(env) == []


async def test_a_stop_past_its_drain_is_the_gateways_to_recover(tmp_path) -> None:
    """A Gateway stop whose drain runs out aborts the run with ``stopReason: "restart"`` and leaves its row running
    (measured on 2026.9.6): the next boot recovers it. owc keeps M open and sends no resume."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.recovery = lambda k, source: [Text("Picked up after the stop."), End()]
        await _cut_run(env, key)
        await env.sim.restart("stop", down_seconds=3.0)
        await env.settled()
        m = ids.message_id(key, "S")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}
        assert messages[m]["done"] is True
        assert messages[m]["content"] == f"Working on the first half.\n{GW}\nPicked up after the stop."
        assert resume_runs(env) == [] and len(recoveries(env)) == 1


async def test_a_resume_the_gateway_cannot_take_is_held_until_the_next_hello(tmp_path, caplog) -> None:
    """ResumeQueuedUntilHelloTest: the run's CLI child is killed from outside (exit 143) while the Gateway refuses
    sends (``UNAVAILABLE``: draining, starting); the resume is held on the cut and sent, under the same run id, at
    the next hello-ok: exactly one resume run, into M, and nothing sent before that hello."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = await _cut_run(env, key)
        env.sim.responder = lambda k, message: [Text("Resumed and finished."), End()]
        env.sim.fail_requests("chat.send")
        run.end("error", error=EXIT_143)
        await env.until(lambda: any(m.getMessage().startswith("runs.resume_held") for m in caplog.records))
        assert resume_runs(env) == [], "nothing started while the Gateway refused"
        held = next(m.getMessage() for m in caplog.records if m.getMessage().startswith("runs.resume_held"))
        env.sim.disconnect()  # the next connection's hello-ok sends it
        await env.settled()
        m = ids.message_id(key, "S")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}
        [resume] = resume_runs(env)
        assert resume in held, "the held run id is the one sent"
        assert ids.parse_run_id(resume).message_id == m
        assert messages[m]["done"] is True
        assert messages[m]["content"] == f"Working on the first half.\n{OWC}\nResumed and finished."
        assert messages[m]["meta"]["openclaw_resumes"] == 1
        user_turns = [msg for msg in env.sim.sessions[key].transcript if msg.get("idempotencyKey") == f"{resume}:user"]
        assert [u["content"] for u in user_turns] == [RESUME_DIRECTIVE]


async def test_a_container_stop_is_resumed_into_the_message_with_its_tool_card(tmp_path) -> None:
    """Row 4: the CLI child killed from outside (exit 143) fails the row; owc resumes it. The tool card the cut run
    made stays, followed by the resume's text."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = env.sim.start_run(key, "S", user_text="Build it")
        run.tool("exec", {"cmd": "make"}, "ok")
        keeper = env.keepers["A"]
        await keeper.until(lambda: keeper.totals()[0] >= 1)
        env.sim.responder = lambda k, message: [Text("Build resumed: all green."), End()]
        await env.sim.restart("container")
        await env.settled()
        m = ids.message_id(key, "S")
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True and "error" not in final
        # The tool card, the seam (owc resumed it), the resume's text.
        assert [i["type"] for i in final["output"]] == ["function_call", "function_call_output", "message", "message"]
        assert final["content"] == f"{OWC}\nBuild resumed: all green."
        assert len(resume_runs(env)) == 1 and recoveries(env) == []


async def test_four_outside_kills_in_a_row_make_three_resumes_then_the_cut_off_note(tmp_path) -> None:
    """OomResumeLoopTest: every resume is OOM-killed again (exit 137). The budget is counted on M: three resumes,
    then M is finished with what it has and the cut-off note."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        said = iter(range(1, 10))
        env.sim.responder = lambda k, message: [Text(f"Attempt {next(said)}."), End("error", error=EXIT_137)]
        run = env.sim.start_run(key, "S", user_text="Crunch the data")
        run.text("Loading.")
        keeper = env.keepers["A"]
        await keeper.until(lambda: keeper.totals()[0] >= 1)
        run.end("error", error=EXIT_137)
        await env.settled()
        m = ids.message_id(key, "S")
        final = (await env.messages(chat_id))[m]
        assert len(resume_runs(env)) == MAX_RESUMES
        assert final["done"] is True
        assert final["content"] == f"Loading.\n{OWC}\nAttempt 1.\n{OWC}\nAttempt 2.\n{OWC}\nAttempt 3."
        assert final["error"]["content"] == BUDGET_NOTE.format(n=MAX_RESUMES + 1)
        assert final["meta"]["openclaw_resumes"] == MAX_RESUMES


async def test_the_budget_is_read_from_the_message_after_an_owc_restart(tmp_path) -> None:
    """A restart of owc does not reset the count: M's meta says how many resumes it had."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.responder = lambda k, message: [Text("Again."), End("error", error=EXIT_137)]
        run = env.sim.start_run(key, "S", user_text="Crunch")
        run.text("Loading.")
        keeper = env.keepers["A"]
        await keeper.until(lambda: keeper.totals()[0] >= 1)
        m = ids.message_id(key, "S")
        # What an earlier owc process left on M: two resumes already.
        output = (await env.messages(chat_id))[m]["output"]
        await env.store.write(
            chat_id, m, content="Loading.", output=output, done=False, meta={"openclaw_resumes": MAX_RESUMES - 1}
        )
        run.end("error", error=EXIT_137)
        await env.settled()
        assert len(resume_runs(env)) == 1
        assert (await env.messages(chat_id))[m]["error"]["content"] == BUDGET_NOTE.format(n=MAX_RESUMES + 1)


async def test_no_resume_while_a_recovery_holds_the_session(tmp_path) -> None:
    """Row 3: a run cut from outside while the session is busy (here: a run queued behind it starts at once) is not
    resumed into it; when that run settles it is the session's newest, so M ends with the cut-off note."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = await _cut_run(env, key)
        nxt = env.sim.start_run(key, "NEXT", user_text="Another job", steps=[Text("Next job done."), Hold(), End()])
        run.end("error", error=EXIT_143)
        m = ids.message_id(key, "S")
        keeper = env.keepers["A"]
        await env.until(lambda: ids.message_id(key, "NEXT") in {r.message_id for r in keeper.ledger.unsettled()})
        nxt.release()
        await env.settled()
        messages = await env.messages(chat_id)
        assert resume_runs(env) == []
        assert messages[m]["done"] is True and messages[m]["error"]["content"] == NEWER_RUN_NOTE
        assert messages[m]["content"] == "Working on the first half."
        assert messages[ids.message_id(key, "NEXT")]["content"] == "Next job done."


async def test_a_real_error_and_a_user_stop_are_not_continued(tmp_path) -> None:
    """Rows 6 and 7: a Stop (killed without a notice) and a real error (a CLI exit 1) finalize M; nobody resumes."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = await _cut_run(env, key)
        run.end("error", error="Claude Code process exited with code 1")
        run2 = env.sim.start_run(key, "S2", user_text="Again")
        run2.text("Second.")
        run2.end("aborted", stop_reason="rpc")
        await env.settled()
        messages = await env.messages(chat_id)
        assert resume_runs(env) == []
        assert messages[ids.message_id(key, "S")]["error"]["content"].endswith("code 1")
        assert messages[ids.message_id(key, "S2")]["done"] is True


@pytest.mark.parametrize("mode", ["restart", "stop", "container", "crash"])
async def test_a_user_turn_cut_in_each_mode_gets_one_continuation(tmp_path, mode: str) -> None:
    """The Pipe's user turn (its request hands M over first): each mode gives exactly one continuation, into M."""
    from test_inline import _open_webui_ends_its_task, _stream, _user_turn_chat

    async with open_env(tmp_path) as env:
        await env.connect()
        chat_id, key, m = await _user_turn_chat(env)
        env.sim.responder = lambda k, msg: [Tool("exec", {"cmd": "make"}, "ok"), Text("Half of it"), Hold()]
        env.sim.recovery = lambda k, source: [Text("Recovered the rest."), End()]
        turn = await env.runtimes["A"].user_turn(key, ids.input_run_id(chat_id, m, "t"), "go")
        await _stream(turn, until="Half of it")
        env.sim.responder = lambda k, msg: [Text("Resumed the rest."), End()]
        await env.sim.restart(mode)
        streamed = await _stream(turn)
        await _open_webui_ends_its_task(env, turn, streamed)
        await env.settled()
        messages = await env.messages(chat_id)
        final = messages[m]
        continuations = len(resume_runs(env)) + len(recoveries(env))
        assert continuations == 1, (resume_runs(env), recoveries(env))
        assert final["done"] is True
        tail = "Resumed the rest." if mode == "container" else "Recovered the rest."
        assert final["content"].endswith(tail), final["content"]
        assert sum(1 for i in final["output"] if i["type"] == "function_call") == 1
        assert [mid for mid, msg in messages.items() if msg["role"] == "assistant"] == [m]


class _ClaimsHeldBack:
    """One process's view of the shared database whose claims of one message wait until the test lets them go: the
    order two processes reach that message in is the test's to choose, not the worker threads'."""

    def __init__(self, store: TrioChatStore, message_id: str) -> None:
        self._store = store
        self._message_id = message_id
        self.go = trio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def claim(self, chat_id: str, message_id: str, **kwargs: Any) -> Any:
        if message_id == self._message_id:
            await self.go.wait()
        return await self._store.claim(chat_id, message_id, **kwargs)


async def test_a_recovery_waiting_for_a_cut_run_that_another_process_finished_links_all_the_same(
    tmp_path, mock_clock
) -> None:
    """Two processes see a crash cut S. A writes M open, links the Gateway's recovery into it and finishes M; only
    then does B's writer of S reach M, find it done and settle S as "finished elsewhere". B's recovery, which was
    waiting (``Cuts.link``) for S to be settled, must go on into M (it finds M done and backs off). Before, that path
    released nothing the recovery waited on: it stayed claiming and B never went quiet (fuzzer, seed 172, about 1
    play in 30 under load)."""
    # Virtual time (the crash's downtime and the reconnect cost no real time), bounded: a hang fails at once.
    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        m = ids.message_id(key, "S")
        held = _ClaimsHeldBack(env.store, m)
        a = await env.connect("A")
        b = await env.connect("B", store=held)  # type: ignore[arg-type]  # the store, its claims of M held back
        env.sim.plan_recovery(key, "R1", [Hold(), Text("Picked up after the crash."), End()])
        await _cut_run(env, key)  # A claims M; B's claim of it waits
        await env.sim.restart("crash")

        def state(keeper: Any, run_id: str) -> State | None:
            run = keeper.ledger.get(key, run_id)
            return run.life.state if run is not None else None

        def b_recovery_linking() -> bool:
            run = b.ledger.get(key, "R1")
            return run is not None and run.cont.linking

        # A streams its recovery into M; B's recovery waits for B's writer of S, held back at M.
        await env.until(lambda: state(a, "R1") is State.STREAMING and b_recovery_linking())
        env.sim.handle("R1").release()
        await env.until(lambda: a.ledger.is_settled(key, "R1"))
        assert (await env.messages(chat_id))[m]["done"] is True, "A finished M"
        assert state(b, "S") is State.CLAIMING and b_recovery_linking()
        held.go.set()  # B's S finds M done: "finished elsewhere"
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        assert b.ledger.is_settled(key, "S") and b.ledger.is_settled(key, "R1")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}, "the recovery has no message of its own"
        assert messages[m]["done"] is True
        assert messages[m]["content"] == f"Working on the first half.\n{GW}\nPicked up after the crash."
        assert messages[m]["meta"]["openclaw_chain"] == ["S", "R1"]
        assert resume_runs(env) == []


@pytest.mark.parametrize("mode", ["restart", "crash", "stop-past-drain"])
async def test_a_cut_after_a_tool_call_never_ends_with_less_than_it_showed(tmp_path, mode: str) -> None:
    """Issue 24, item 5: the run says a text, calls a tool, says more, and is cut. The Gateway stores nothing of the
    text the cut takes (the transcript ends at the tool call), but the tabs had shown it: the message the
    recovery finishes shows it, then the recovery's own text."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.recovery = lambda k, source: [Text("Picked up."), End()]
        run = env.sim.start_run(key, "S", user_text="Do the long job")
        run.text("Checking.")
        run.tool("exec", {"cmd": "ls"}, "a b")
        run.text("Now the second half")
        m = ids.message_id(key, "S")
        await env.emitter.until(lambda: "Now the second half" in str(env.emitter.streams.get((chat_id, m))))
        if mode == "stop-past-drain":
            await env.sim.restart("stop", down_seconds=3.0)
        else:
            await env.sim.restart(mode)
        await env.settled()
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}, "the recovery has no message of its own"
        final = messages[m]
        assert final["done"] is True
        assert final["content"] == f"Checking.\nNow the second half\n{GW}\nPicked up."
        assert [i["type"] for i in final["output"]].count("function_call") == 1
        assert final.get("error") is None


@pytest.mark.parametrize("mode", ["crash", "restart"])
async def test_a_recovery_the_gateway_gives_up_ends_the_message_it_held_open(tmp_path, mock_clock, mode: str) -> None:
    """Issue 24, item 7: a cut run is the Gateway's to recover (M held open: owc is back while the row still says
    ``running``), and the Gateway gives up (its three charged attempts fail before the agent starts, seed 004): the
    row ends ``failed`` naming the last attempt's fresh run id, not the cut run. M must not stay ``done: false``: it
    ends with what it showed and a cut-off note that says why (not "a newer run took over": there is none)."""
    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        await _cut_run(env, key)
        env.sim.hold_recovery(key)
        await env.sim.restart(mode)
        m = ids.message_id(key, "S")

        def held_open() -> bool:
            run = keeper.ledger.get(key, "S")
            return keeper.cuts.by_key.get(key) is not None and (run is None or run.life.settled)

        await env.until(held_open)
        assert (await env.messages(chat_id))[m]["done"] is False
        # The tabs were told M as written open, with its text: not an empty bubble while the recovery is owed.
        told = [e.event["data"]["messages"][m] for e in env.emitter.of(m, "chat:messages")][-1]
        assert told["done"] is False and told["content"] == "Working on the first half."
        env.sim.give_up_recovery(key)
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}
        assert messages[m]["done"] is True
        assert messages[m]["content"] == "Working on the first half."
        error = str((messages[m].get("error") or {}).get("content"))
        assert error.startswith("This reply was cut off") and "could not recover" in error, error
        assert "restart recovery failed 3 times" in error
        assert resume_runs(env) == [] and recoveries(env) == []


@pytest.mark.parametrize("mode", ["crash", "restart"])
async def test_a_recovery_behind_a_newer_run_still_links_into_the_cut_runs_message(
    tmp_path, mock_clock, mode: str
) -> None:
    """Issue 24, item 4 (seed 000 case 5): the Gateway's recovery of a cut run S starts a few seconds after its boot;
    meanwhile a newer run N is sent on the key. The Gateway starts the recovery first (the admission of a turn on a
    session with a recovery pending dispatches it: measured on 2026.9.6, ``tests/test_realgw_cuts.py``) and N runs
    after it (on the real Gateway N's own turn was not run at all). Link rule E goes by the recovery's provenance
    and the transcript's order: the recovery writes into S's message (no note), N has a message of its own."""
    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        env.sim.recovery = lambda k, source: [Text("Picked up after the boot."), End()]
        await _cut_run(env, key)
        await env.sim.restart(mode, recovery_delay=5.0)
        await keeper.until(lambda: keeper.table is not None and keeper.table.hello is not None)
        newer = env.sim.start_run(key, "N", user_text="Something else")
        # Behind the recovery it started.
        await env.sim.wait_for(lambda: env.sim.sessions[key].active is newer.run)
        newer.text("The newer answer.").end()
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        m, n = ids.message_id(key, "S"), ids.message_id(key, "N")
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m, n}, "the recovery has no message of its own"
        assert messages[m]["done"] is True and messages[m].get("error") is None
        assert messages[m]["content"] == f"Working on the first half.\n{GW}\nPicked up after the boot."
        assert messages[m]["meta"]["openclaw_chain"] == ["S", recoveries(env)[0]]
        assert messages[n]["done"] is True and messages[n]["content"] == "The newer answer."


async def test_a_run_that_ended_aborted_unseen_before_a_crash_is_not_held_for_a_recovery(tmp_path, mock_clock) -> None:
    """Issue 24, item 12 (fuzz seeds 30151, 77089): S ends ``aborted`` right after a tool call while owc hears
    nothing (its abort stores no ending message), a newer run X runs and ends, then the Gateway crashes. At the new
    boot's hello the row is ``done`` under X, taken for the boot's recovery of S: M is held for it. The transcript
    shows X begun after S's last message with no recovery turn before it, and the Gateway recovers a session before
    any turn admitted after the boot: S ended on its own. M ends as S left it, with no cut-off note. Before, M
    waited for a link that could never come: the hold never ended and ``settled()`` waited for ever (the play ran to
    its bound)."""
    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = await _cut_run(env, key)
        run.tool("exec", {"i": 1}, "ok")
        env.sim.mute()  # a half-open socket: owc hears nothing more until the crash cuts it
        run.end("aborted")
        env.sim.start_run(key, "X", user_text="Something else").text("The newer answer.").end()
        await env.sim.restart("crash")
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        m, x = ids.message_id(key, "S"), ids.message_id(key, "X")
        messages = await env.messages(chat_id)
        assert recoveries(env) == [] and resume_runs(env) == []
        assert messages[m]["done"] is True and messages[m].get("error") is None, messages[m].get("error")
        assert messages[m]["content"].startswith("Working on the first half.")
        assert messages[x]["done"] is True and messages[x]["content"] == "The newer answer."


async def test_a_shutdown_notice_the_gateway_never_follows_with_a_close_holds_no_message_open(
    tmp_path, mock_clock
) -> None:
    """Issue 24, item 13: a ``shutdown`` notice (a stop: no ``restartExpectedMs``), a run aborted after it (its row
    ``killed``: owc's to resume), and then no close: the Gateway goes on serving, its ticks keep coming. The resume
    waits for the next hello only while the Gateway may be going down; a tick after the notice says it is not, so
    the resume goes and M is finished (before: ``done: false`` until a reconnect that never came)."""
    from owc.sim.delivery import everyone

    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = await _cut_run(env, key)
        env.sim.fanout.emit("shutdown", {"reason": "gateway stopping"}, audience=everyone, drop_if_slow=False)
        run.end("aborted", stop_reason="rpc")
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        m = ids.message_id(key, "S")
        messages = await env.messages(chat_id)
        assert len(resume_runs(env)) == 1
        assert messages[m]["done"] is True and messages[m]["content"].startswith("Working on the first half.")


class _EndsHeldBack(_ClaimsHeldBack):
    """Also holds this process's finishing writes (``done: true``) of the message until the test lets them go."""

    def __init__(self, store: TrioChatStore, message_id: str) -> None:
        super().__init__(store, message_id)
        self.ends = trio.Event()

    async def write(self, chat_id: str, message_id: str, **kwargs: Any) -> Any:
        if message_id == self._message_id and kwargs.get("done") is True:
            await self.ends.wait()
        return await self._store.write(chat_id, message_id, **kwargs)


async def test_a_cut_another_process_resumed_is_not_ended_as_taken_by_a_newer_run(tmp_path, mock_clock) -> None:
    """Two processes see a container stop cut S (owc resumes it). A writes M open and sends the resume, which streams
    into M; B's writer of S reaches M only then (held by A's resume writer: B keeps M open and settles S). The
    session's last run is now M's own resume: B must neither end M with the "newer run" note nor send a resume of
    its own. Before, B took the resume for a newer run and ended M with the note over what the resume wrote
    (fuzzer, seed 20808, about 1 play in 15 under load)."""
    from owc.registry import WriterRegistry

    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        m = ids.message_id(key, "S")
        held = _EndsHeldBack(env.store, m)
        a = await env.connect("A")
        b = await env.connect("B", store=held, registry=WriterRegistry())  # type: ignore[arg-type]  # another process
        env.sim.responder = lambda k, message: [Text("Resumed and"), Hold(), Text(" finished."), End()]
        await _cut_run(env, key)  # A claims M; B's claim of it waits
        await env.sim.restart("container")
        await env.until(lambda: any(a.ledger.get(key, r) is not None for r in resume_runs(env)))
        [resume] = resume_runs(env)
        await env.until(lambda: a.ledger.get(key, resume) is not None and a.ledger.get(key, resume).writer_live)
        held.go.set()  # B's writer of S finds M held by A's resume writer
        await env.until(lambda: b.ledger.is_settled(key, "S"))
        env.sim.handle(resume).release()
        await env.until(lambda: a.ledger.is_settled(key, resume))
        held.ends.set()  # whatever B meant to finish M with lands now, after the resume's finalize
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True
        assert "error" not in final or not final["error"], final.get("error")
        assert final["content"] == f"Working on the first half.\n{OWC}\nResumed and finished."
        assert resume_runs(env) == [resume], "one resume"
        assert NEWER_RUN_NOTE not in str(final)


class _Ledger:
    def __init__(self, known: set[str]) -> None:
        self.known = known

    def get(self, key: str, run_id: str) -> Any:
        return object() if run_id in self.known else None

    def is_settled(self, key: str, run_id: str) -> bool:
        return False


class _Bridge:
    def __init__(self, known: set[str]) -> None:
        self.ledger = _Ledger(known)

    def wake(self) -> None:
        pass


@pytest.mark.parametrize("case", ["recovered elsewhere", "seen here", "no recovery"])
def test_a_held_cut_whose_recovery_another_process_gave_a_message_ends_instead_of_waiting(case: str) -> None:
    """Fuzz seed 40434 (shrunk; two deploys, a crash): the process that comes back second holds S's message M open for
    the boot's recovery R, which the hello's row names as the session's last run. The other process, back first,
    had already settled R with a message of its own (M did not exist yet, so it could not link R to it). R never
    claims here, so nothing would link it to M, and M stayed ``done: false``: the play hung. A reconcile pass that
    reads R's finished message, R a recovery by the transcript and never a run of this process, ends M. R no
    recovery (a run admitted before a delayed recovery, which then still comes here: fuzz seed 15), or a run this
    process has (its own link check decides), leave M waiting."""
    from test_link_rule import PROV, history, said, user

    from owc.rules.owner import Owner, Seen
    from owc.runs.cuts import Cut, Cuts

    keeper = _Bridge({"R"} if case == "seen here" else set())
    cuts = Cuts(keeper)  # type: ignore[arg-type]
    ref = ids.SessionRef(agent_id="main", user_id="u", chat_id="c")
    cut = Cut("k", ref, "M", ("S",), Owner.GATEWAY, Seen(terminal=False), "boot-1", recovery="R")
    cuts.by_key["k"] = cut
    inbound = {"role": "user", "content": "[cron] scheduled turn", "idempotencyKey": "f00d"}
    turn = user("R", "continue", PROV) if case != "no recovery" else user("R", "a new question")
    page = history(inbound, turn, said("R", "on"))
    messages = {
        "M": {"id": "M", "done": False, "meta": {"openclaw_run": "S", "openclaw_open": True}},
        "MR": {"id": "MR", "done": True, "meta": {"openclaw_run": "R"}},
    }
    cuts.seen_chat(None, "c", messages, page)  # type: ignore[arg-type]
    if case == "recovered elsewhere":
        assert "k" not in cuts.by_key and cuts._ending["S"] is cut and cut.note == NEWER_RUN_NOTE
    else:
        assert cuts.by_key["k"] is cut and not cut.ending


@pytest.mark.parametrize("continues", [True, False])
def test_a_continuations_finish_drops_the_cut_off_note_an_earlier_finish_left(continues: bool) -> None:
    """Fuzz seed 40434 (two deploys, a crash under a run that had stored nothing): the deploy that never saw the run
    stream finished its message with "cut off before any of it was saved"; the boot's recovery then linked into that
    message and finished it with its own text, and the note stayed under it ("[cutoff] ... although run R continued
    its cut run"). A continuation's finish (a recovery or a resume: ``continues``) drops a cut-off note; any other
    write, and any other error, keeps what is there."""
    from owc.rules.owner import empty_finish_note
    from owc.store import tree

    note = {"content": empty_finish_note(None, "the Gateway restarted (a new boot)", False)}
    chat = {"history": {"messages": {"M": {"id": "M", "role": "assistant", "done": True, "error": dict(note)}}}}
    tree.update_message(chat, "M", content="Recovered.", output=[], done=True, continues=continues)
    assert ("error" in chat["history"]["messages"]["M"]) is not continues
    own = {"content": "boom"}
    chat = {"history": {"messages": {"M": {"id": "M", "role": "assistant", "done": True, "error": dict(own)}}}}
    tree.update_message(chat, "M", content="Recovered.", output=[], done=True, continues=True)
    assert chat["history"]["messages"]["M"]["error"] == own


@pytest.mark.parametrize("error", ["nothing saved", "not read", "newer run", "its own"])
def test_a_correction_that_fills_a_message_finished_empty_drops_the_empty_note_only(error: str) -> None:
    """Fuzz seed 141646 (two deploys; a run calls a tool before the second connects, ends final while its transcript
    cannot be read): one deploy finished the message from its stream, which held nothing, with "cut off before any
    of it was saved"; the correction pass later filled it from the transcript and kept the note under the card
    (``[cutoff]`` on a run that ended on its own). The correction's write (``fills``) drops that note once the message
    has output; a cut-off note of another kind and the run's own error stay; an empty fill keeps it."""
    from owc.rules.owner import NEWER_RUN_NOTE, NOT_READ_NOTE, empty_finish_note
    from owc.store import tree

    content = {
        "nothing saved": empty_finish_note("final", "chat final", False),
        "not read": NOT_READ_NOTE,
        "newer run": NEWER_RUN_NOTE,
        "its own": "boom",
    }[error]
    card = [{"type": "function_call", "call_id": "c1", "name": "exec", "arguments": "{}"}]

    def chat() -> dict:
        m = {"id": "M", "role": "assistant", "done": True, "error": {"content": content}}
        return {"history": {"messages": {"M": m}}}

    filled = chat()
    tree.update_message(filled, "M", content="", output=card, done=True, fills=True)
    assert ("error" in filled["history"]["messages"]["M"]) is (error not in ("nothing saved", "not read"))
    empty = chat()
    tree.update_message(empty, "M", content="", output=[], done=True, fills=True)
    assert empty["history"]["messages"]["M"]["error"] == {"content": content}
    plain = chat()
    tree.update_message(plain, "M", content="", output=card, done=True)
    assert plain["history"]["messages"]["M"]["error"] == {"content": content}


@pytest.mark.parametrize(
    ("done", "meta", "awaits"),
    [
        (True, {"openclaw_correct": True}, True),
        (True, {}, False),
        (True, None, False),
        (True, {"openclaw_correct": True, "openclaw_open": True}, False),  # still owed its finish: not finished
        (False, {"openclaw_correct": True}, False),
    ],
)
def test_a_message_awaits_its_correction_while_finished_and_marked(done: bool, meta: dict | None, awaits: bool) -> None:
    """Fuzz seed 212956: the mark a short finish leaves (``CORRECT_MARK``) is what a later process corrects; an open
    message is the reconcile pass's to finish, not a correction's."""
    from owc.rules.finished import awaits_correction

    assert awaits_correction({"done": done, **({"meta": meta} if meta is not None else {})}) is awaits


@pytest.mark.parametrize(("done", "sets", "kept"), [(True, True, True), (True, False, False), (False, False, True)])
def test_only_the_finishing_write_that_sets_the_correct_mark_keeps_it(done: bool, sets: bool, kept: bool) -> None:
    """A finish from the transcript (or any finish that does not say it is short) makes the message whole: the mark
    goes with it. A write that leaves M open decides nothing of it."""
    from owc.rules.finished import CORRECT_MARK
    from owc.store import tree

    chat = {
        "history": {"messages": {"M": {"id": "M", "role": "assistant", "done": True, "meta": {CORRECT_MARK: True}}}}
    }
    meta = {CORRECT_MARK: True} if sets else None
    tree.update_message(chat, "M", content="", output=[], done=done, meta=meta)
    assert (CORRECT_MARK in chat["history"]["messages"]["M"]["meta"]) is kept


class _LaterClaimsHeldBack(_ClaimsHeldBack):
    """Lets the first claim of the message go (the run's claim as it begins) and holds every later one (its writer's
    claim on the next connection, after a restart) until the test lets them go."""

    def __init__(self, store: TrioChatStore, message_id: str) -> None:
        super().__init__(store, message_id)
        self.claims = 0

    async def claim(self, chat_id: str, message_id: str, **kwargs: Any) -> Any:
        if message_id == self._message_id:
            self.claims += 1
            if self.claims > 1:
                await self.go.wait()
        return await self._store.claim(chat_id, message_id, **kwargs)


async def test_a_crash_cut_runs_stream_is_put_in_front_of_a_recovery_another_process_finished_first(
    tmp_path, mock_clock, db_url
) -> None:
    """Class A of issue 24's campaign (fuzz seeds 40164, 40632): A streams S, and a crash cuts it before the Gateway
    stored any of it. B, which never showed S's text, finishes M with the boot's recovery (its part alone: S's
    transcript part is empty); only then does A's writer of S reach M on its next connection and find it finished.
    A's tabs showed S's text in M, and a message never ends with less than it showed (issue 24, item 5): A puts
    what it showed in front of the recovery's part, in one conditional write. Before, A dropped it
    (``runs.cut_finished_elsewhere``): M showed the recovery's text only. A second pass adds nothing."""
    from owc.registry import WriterRegistry

    async with virtual_time(mock_clock), open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        m = ids.message_id(key, "S")
        held = _LaterClaimsHeldBack(env.store, m)
        await env.connect("A", store=held)  # type: ignore[arg-type]
        env.sim.recovery = lambda k, source: [Text("Picked up after the crash."), End()]
        await _cut_run(env, key)
        b = await env.connect("B", registry=WriterRegistry())  # another process, which never saw S's text
        await env.sim.restart("crash")
        await env.until(lambda: held.claims > 1)  # A's writer of S claims M again on its next connection: held
        with trio.fail_after(PLAY_BOUND_S):
            while (await env.messages(chat_id))[m].get("done") is not True:
                await env.until(lambda: not b.ledger.unsettled())
                await trio.sleep(0.1)
        assert (await env.messages(chat_id))[m]["content"] == "Picked up after the crash."  # B's finish: the order
        held.go.set()
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True
        assert final["content"] == f"Working on the first half.\n{GW}\nPicked up after the crash."
        assert final["meta"]["openclaw_chain"] == ["S", recoveries(env)[0]]
        assert final["meta"]["openclaw_own_at"] == 1, "the recovery's part now begins after S's"
        again = await env.store.add_shown(chat_id, m, shown_through={"S": final["output"][:1]}, user_id="user-1")
        assert again is None, "a second pass adds nothing"
        assert resume_runs(env) == [] and len(recoveries(env)) == 1


async def test_a_joiners_stream_of_a_crash_cut_run_is_put_in_front_of_a_recovery_another_process_finished_first(
    tmp_path, mock_clock, db_url
) -> None:
    """Fuzz seeds 211298 and 150408 (class A, a joiner): S calls a tool before A connects, so A joins S mid-run and
    streams its text after the call; a crash cuts S (the transcript ends at the call). B, which never saw that text,
    finishes M with the boot's recovery first (S's part from the transcript: the call and its result); A's writer of
    S then finds M finished. A's stream lacks S's beginning, so what it showed is lined up at the transcript's end
    (``shown_in_front``'s ``missed``), as A's own finalize would line it up. Before, [text] against [call, result]
    parted at once and the transcript won: M showed the call and the recovery's text only."""
    from owc.registry import WriterRegistry

    async with virtual_time(mock_clock), open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        m = ids.message_id(key, "S")
        env.sim.recovery = lambda k, source: [Text("Picked up after the crash."), End()]
        run = env.sim.start_run(key, "S", user_text="Do the long job")
        run.tool("exec", {"cmd": "ls"}, "a b")
        held = _LaterClaimsHeldBack(env.store, m)
        await env.connect("A", store=held)  # type: ignore[arg-type]
        run.text("Done.")
        await env.emitter.until(lambda: "Done." in str(env.emitter.streams.get((chat_id, m))))
        b = await env.connect("B", registry=WriterRegistry())  # another process, which never saw S's text
        await env.sim.restart("crash")
        await env.until(lambda: held.claims > 1)  # A's writer of S claims M again on its next connection: held
        with trio.fail_after(PLAY_BOUND_S):
            while (await env.messages(chat_id))[m].get("done") is not True:
                await env.until(lambda: not b.ledger.unsettled())
                await trio.sleep(0.1)
        # B's finish: S's tool card (from the transcript), the seam, the recovery's text.
        assert (await env.messages(chat_id))[m]["content"] == f"{GW}\nPicked up after the crash."
        held.go.set()
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True
        assert final["content"] == f"Done.\n{GW}\nPicked up after the crash."
        assert [i["type"] for i in final["output"]] == ["function_call", "function_call_output", *["message"] * 3]
        assert final["meta"]["openclaw_chain"] == ["S", recoveries(env)[0]]
        assert final["meta"]["openclaw_own_at"] == 3, "the recovery's part now begins after S's"
        assert resume_runs(env) == [] and len(recoveries(env)) == 1


async def test_a_crash_cut_runs_stream_is_added_to_its_message_another_process_finished_as_the_runs_own(
    tmp_path, mock_clock, db_url
) -> None:
    """Class A's last shape (fuzz seed 40164 under load, about 1 play in 20-50): A streams S, a text after a tool
    call, and a crash cuts it (the transcript ends at the call). Another deploy, which never saw S stream, reconciles
    S as ended and finishes M as S's own message from the transcript (no chain: the call alone); only then does A's
    writer of S reach M on its next connection and find it finished by S itself. A's tabs showed the text, so it
    goes into M (``never_less`` of what A showed and M), in one conditional write, before the boot's recovery reads
    M as its prefix. Before, ``shown_in_front`` added only in front of a continuation: M ended with the call and
    the recovery's text. The other deploy's finish is written here as its writer writes it (the order it met M in
    is the test's to choose)."""
    from owc.render.transcript import output_from_transcript
    from owc.runs.writer import read_run_window

    async with virtual_time(mock_clock), open_env(tmp_path, db_url=db_url) as env:
        chat_id, key = await env.chat()
        m = ids.message_id(key, "S")
        held = _LaterClaimsHeldBack(env.store, m)
        await env.connect("A", store=held)  # type: ignore[arg-type]
        env.sim.recovery = lambda k, source: [Text("Picked up."), End()]
        run = env.sim.start_run(key, "S", user_text="Do the long job")
        run.text("Checking.")
        run.tool("exec", {"cmd": "ls"}, "a b")
        run.text("Now the second half")
        await env.emitter.until(lambda: "Now the second half" in str(env.emitter.streams.get((chat_id, m))))
        await env.sim.restart("crash")
        await env.until(lambda: held.claims > 1)  # A's writer of S claims M again on its next connection: held
        history = await read_run_window(env.clients["A"].request, key, "S")
        stored = output_from_transcript(history, "S") if history is not None else None
        assert stored is not None and [i["type"] for i in stored] == [
            "message",
            "function_call",
            "function_call_output",
        ]
        written = await env.store.write(chat_id, m, content="Checking.", output=stored, done=True, user_id="user-1")
        assert type(written).__name__ == "Written"  # the other deploy's finish of S, chainless
        held.go.set()
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        final = (await env.messages(chat_id))[m]
        assert final["done"] is True
        assert final["content"] == f"Checking.\nNow the second half\n{GW}\nPicked up."
        assert [i["type"] for i in final["output"]].count("function_call") == 1
        again = await env.store.add_shown(chat_id, m, shown_through={"S": final["output"][:4]}, user_id="user-1")
        assert again is None, "a second pass adds nothing"
        assert resume_runs(env) == [] and len(recoveries(env)) == 1


class _Held:
    """A ledger holding the cut run, at a Gateway time of its own."""

    def __init__(self, began_ms: int) -> None:
        self.run = SimpleNamespace(standing=SimpleNamespace(order=(began_ms, 1), timed=True))

    def get(self, key: str, run_id: str) -> Any:
        return self.run if run_id == "S" else None


@pytest.mark.parametrize("began", ["before the cut run", "after the cut run"])
async def test_a_run_that_began_before_the_held_cut_run_does_not_end_it_as_newer(began: str) -> None:
    """Fuzz seed 40958 (shrunk: one deploy, killed while three runs ran on the chat, started again; a fourth run S
    streams, a Gateway restart cuts it): the reconcile pass opens the runs that ran while owc was away after S's cut
    was decided, and a run of its own opened after the cut was taken for one that took the session after it: the
    held cut ended ("newer run"), so the boot's recovery found no cut to wait for, claimed M before S's writer wrote it
    open and finished it without the streamed tail the transcript lacks. A run that began (Gateway times) before S
    leaves the cut held; one that began after it ends it, as before."""
    from test_link_rule import history, said, user

    from owc.rules.owner import Owner, Seen
    from owc.runs.cuts import Cut, Cuts

    keeper = SimpleNamespace(ledger=_Held(began_ms=2_000), wake=lambda: None)
    cuts = Cuts(keeper)  # type: ignore[arg-type]
    ref = ids.SessionRef(agent_id="main", user_id="u", chat_id="c")
    cut = Cut("k", ref, "M", ("S",), Owner.GATEWAY, Seen(terminal=False), "boot-1", opened=1)
    cuts.by_key["k"] = cut
    page = history(user("O", "a question of its own"), said("O", "An answer."))
    other = SimpleNamespace(
        run_id="O",
        session_key="k",
        cont=SimpleNamespace(link_checked=False, chain=(), cut=None),
        read=SimpleNamespace(history=page),
        life=SimpleNamespace(ended=True, settled=False),
        renderer=SimpleNamespace(output=lambda: []),
        # Opened after the cut (2 > 1).
        standing=SimpleNamespace(order=(1_000 if began == "before the cut run" else 3_000, 2), timed=True),
    )
    await cuts.link(None, other)  # type: ignore[arg-type]
    if began == "before the cut run":
        assert cuts.by_key["k"] is cut and not cut.ending
    else:
        assert "k" not in cuts.by_key and cuts._ending["S"] is cut and cut.note == NEWER_RUN_NOTE


class _StoreBridge(_Bridge):
    def __init__(self, store: Any) -> None:
        super().__init__(set())
        from owc.emit import RecordingEmitter

        self.store = store
        self.emitter = RecordingEmitter()


@pytest.mark.parametrize("path", ["held cut ends", "a race: the recovery finished twice"])
async def test_a_recoverys_own_message_becomes_part_of_its_cut_runs_message(path: str, tmp_path) -> None:
    """Issue 24 item 4's shape D (``tests/fuzz_repros/recovery-unlinked.jsonl``): two deploys, a crash under S, which
    had stored nothing. The deploy back first cannot name S (its user turn hidden, nothing stored) nor find its
    message (the deploy that streamed S had not claimed it yet): the boot's recovery R gets a message of its own, X.
    Nothing the Gateway says would let it know more, so this is repaired, not prevented:

    * the deploy holding S's cut, back later, finds X finished (``seen_chat``) and, where it ended M with the
      newer-run note before, makes one reply of M and X: S's streamed part, then R's, chain ``[S, R]``; X goes;
    * both deploys settled R at once (one linked it to the cut it held, the other made X): the later finish of the
      two (``one_reply``) takes X out, M already holding R.

    Either way the tabs hear M, the links that changed and the chat's view in one ``chat:messages``."""
    from test_link_rule import PROV, history, said, user

    from owc.rules.owner import NEWER_RUN_NOTE, Owner, Seen
    from owc.runs.cuts import Cut, Cuts
    from owc.store import open_store

    chat_id = "7d0c4a52-3c1e-4c55-9a51-0c2b8f1e6a10"
    key = ids.session_key("main", "u1", chat_id)
    ref = ids.parse_session_key(key)
    m, x = ids.message_id(key, "S"), ids.message_id(key, "R")
    own = {"openclaw_run": "R", "openclaw_writer": "w1"}
    m_meta = {"openclaw_run": "S", "openclaw_writer": "w2"}
    if path == "held cut ends":
        m_meta |= {"openclaw_open": True, "openclaw_chain": ["S"]}
        m_output, m_done = [{"type": "message", "text": "Two lines:"}], False
    else:
        m_meta |= {"openclaw_chain": ["S", "R"]}
        m_output, m_done = [{"type": "message", "text": "Two lines:"}, {"type": "message", "text": "Recovered."}], True
    chat = {
        "id": chat_id,
        "history": {
            "currentId": m,
            "messages": {
                x: {
                    "id": x, "parentId": None, "childrenIds": [m], "role": "assistant", "done": True,
                    "content": "Recovered.", "output": [{"type": "message", "text": "Recovered."}], "meta": own,
                },
                m: {
                    "id": m, "parentId": x, "childrenIds": [], "role": "assistant", "done": m_done,
                    "content": "", "output": m_output, "meta": m_meta,
                },
            },
        },
    }  # fmt: skip
    async with open_store(f"sqlite:///{tmp_path / 'webui.db'}", create=True) as store:
        await store.create_chat(chat_id, "u1", chat=chat)
        keeper = _StoreBridge(store)
        cuts = Cuts(keeper)  # type: ignore[arg-type]
        if path == "held cut ends":
            cut = Cut(key, ref, m, ("S",), Owner.GATEWAY, Seen(terminal=False), "boot-1", recovery="R")
            cuts.by_key[key] = cut
            page = history(
                {"role": "user", "content": "[cron] scheduled turn", "idempotencyKey": "f00d"},
                user("R", "continue", PROV),
                said("R", "Recovered."),
            )
            cuts.seen_chat(None, chat_id, chat["history"]["messages"], page)  # type: ignore[arg-type]
            assert cut.absorb == x and cuts._ending["S"] is cut
            await cuts._end_message(cut, NEWER_RUN_NOTE)
        else:
            run = SimpleNamespace(session_key=key, run_id="R", ref=ref, message_id=m)  # linked into M
            await cuts.one_reply(run)  # type: ignore[arg-type]
        stored = (await store.read_chat(chat_id))["history"]
    assert set(stored["messages"]) == {m} and stored["currentId"] == m
    final = stored["messages"][m]
    if path == "held cut ends":  # made one reply here: the seam between the two parts
        assert [i.get("text") or output_text([i]) for i in final["output"]] == ["Two lines:", GW, "Recovered."]
    else:  # M held R already (the other deploy's write, as the test stored it): left as it was
        assert [i["text"] for i in final["output"]] == ["Two lines:", "Recovered."]
    assert final["done"] is True and "error" not in final and final["meta"]["openclaw_chain"] == ["S", "R"]
    listing = next(e.event["data"] for e in keeper.emitter.events if e.event["type"] == "chat:messages")
    assert listing["currentId"] == m and listing["messages"][m]["parentId"] is None


def test_runs_before_a_cut_run_its_recovery_waits_for_are_not_held_behind_that_recovery() -> None:
    """Fuzz seed 80324 (issue 24 item 12), the wait circle cell by cell (``Cuts.owed_after``): after a crash, a
    reconcile pass is at the boot's recovery R', which waits (``Cuts.link``) for the message of the cut run S it
    recovers; S claims after an earlier run E of the chat (``Ledger.claim_blocker``), carried behind an earlier pass,
    which waited for the pass to give R' its message first: at one Gateway millisecond the places' tie-break puts R'
    (placed by the transcript) before E. R' began after S, so after E: what the pass still owes is owed after E."""
    from types import SimpleNamespace

    from owc.rules.owner import Owner, Seen
    from owc.runs.cuts import Cut, Cuts
    from owc.runs.ledger import Ledger

    key = f"agent:main:openwebui-u1-{'1' * 8}-1111-1111-1111-{'1' * 12}"
    at = 1_796_153_657_191  # one Gateway millisecond for all three (a crash with no downtime)
    ledger = Ledger()
    cuts = Cuts(SimpleNamespace(ledger=ledger, wake=lambda: None))  # type: ignore[arg-type]
    earlier, held, recovery = (ledger.open(key, run_id, seen_ms=at) for run_id in ("E", "S", "R"))
    assert earlier is not None and held is not None and recovery is not None
    recovery.place_in_transcript(at, 0)  # the pass read it in the transcript: (at, 0, 0), before E and S
    assert recovery.place < earlier.place < held.place
    ref = ids.parse_session_key(key)
    assert ref is not None
    cut = Cut(key, ref, held.message_id, ("S",), Owner.GATEWAY, Seen(terminal=False), None)
    cuts.by_key[key] = cut
    owed = recovery.place
    assert not cuts.owed_after(earlier, owed)  # no recovery waits for S yet: the places decide
    cut.awaited, cut.waiting = True, recovery
    assert cuts.owed_after(earlier, owed)  # R' waits for S, placed after E: nothing the pass owes is before E
    assert not cuts.owed_after(held, owed)  # S itself goes by ``awaited``, not by this
    later = ledger.open(key, "L", seen_ms=at + 5)
    assert later is not None and not cuts.owed_after(later, owed)  # a run after S may well follow R'
    assert not cuts.owed_after(earlier, (at - 1, 0, 0))  # the pass still owes a run before R' (and maybe before E)
    recovery.standing.rank = 1  # a recovery the pass did not place: its place says nothing of the pass's order
    assert not cuts.owed_after(earlier, owed)


@pytest.mark.parametrize(
    "case",
    ["later boot names R", "same boot", "recovery known", "row names S", "row failed", "M's resume", "resume owner"],
)
def test_a_later_boots_hello_takes_the_newer_run_it_lists_for_the_recovery_of_a_cut_made_before_it(case: str) -> None:
    """Fuzz seed 41332 (two deploys, a stop with a notice): A cut S at the notice (the row left running: the Gateway
    owns the cut), before the close, so A's next hello found S already ended and ``_decide_unterminated`` never named
    the run M waits for. B, back first at the new boot, gave the boot's recovery R a message of its own; A's pass then
    read it finished but, with no ``Cut.recovery``, left M waiting for ever (the play hung, 2 of 6 plays). A later
    boot's hello whose row names a newer run, running or done, records it (``seen_chat`` then decides from the
    transcript and the chat); the same boot, a recovery known already, a row naming S or failing, M's own resume, or a
    cut owc continues itself record nothing."""
    from owc.protocol.results import SessionRow
    from owc.rules.owner import Owner, Seen
    from owc.runs.cuts import Cut, Cuts

    cuts = Cuts(_Bridge(set()))  # type: ignore[arg-type]
    chat, m = "4be45fc4-b5de-59ad-9d81-5226cb48c17b", "8060411d-3b99-5862-813f-4c0b54f0498e"
    ref = ids.SessionRef(agent_id="main", user_id="u", chat_id=chat)
    owner = Owner.RESUME if case == "resume owner" else Owner.GATEWAY
    known = "R0" if case == "recovery known" else None
    cut = Cut("k", ref, m, ("S",), owner, Seen(terminal=False), "boot-1", recovery=known)
    cuts.by_key["k"] = cut
    last = {"row names S": "S", "M's resume": ids.resume_run_id(chat, m, "1")}.get(case, "R")
    row = SessionRow("k", status="failed" if case == "row failed" else "done", last_run_id=last)
    cuts.on_boot_row(row, "boot-1" if case == "same boot" else "boot-2")
    expected = {"later boot names R": "R", "recovery known": "R0"}.get(case)
    assert cut.recovery == expected


@pytest.mark.parametrize(
    "case", ["recovery before the named run", "named run is the recovery", "S between", "seen here"]
)
def test_a_held_cut_whose_row_names_a_run_after_the_recovery_takes_the_recovery_from_the_transcript(case: str) -> None:
    """Fuzz seed 41332 (shrunk; two deploys, a stop with a notice under S): the boot's recovery R ran first (the
    Gateway's order), then T, a cron run admitted after the boot; the deploy back first gave both messages of their
    own. The other deploy's hello found the row naming T (``boot_row``: ``Cut.recovery`` T), and the transcript says
    T is no recovery, so its pass left M waiting for ever (5 of 10 plays hung). The recovery the transcript shows
    right before T began (``recovery_before``) is taken in its stead: R's finished message ends M, which takes R's
    part. S's own turn between R and T (R an earlier boot's), or R a run of this process, leave M waiting."""
    from test_link_rule import PROV, history, said, user

    from owc.rules.owner import Owner, Seen
    from owc.runs.cuts import Cut, Cuts

    cuts = Cuts(_Bridge({"R"} if case == "seen here" else set()))  # type: ignore[arg-type]
    ref = ids.SessionRef(agent_id="main", user_id="u", chat_id="c")
    named = "R" if case == "named run is the recovery" else "T"
    cut = Cut("k", ref, "M", ("S",), Owner.GATEWAY, Seen(terminal=False), "boot-1", recovery=named)
    cuts.by_key["k"] = cut
    s_turn = {"role": "user", "content": "[inter-session] do it", "idempotencyKey": "beef"}
    cron = {"role": "user", "content": "[cron] scheduled turn", "idempotencyKey": "f00d"}
    recovery = [user("R", "continue", PROV), said("R", "on")]
    page = (
        history(*recovery, s_turn, cron, said("T", "two"))
        if case == "S between"
        else history(s_turn, *recovery, cron, said("T", "two"))
    )
    messages = {
        "M": {"id": "M", "done": False, "meta": {"openclaw_run": "S", "openclaw_open": True}},
        "MR": {"id": "MR", "done": True, "meta": {"openclaw_run": "R"}},
        "MT": {"id": "MT", "done": True, "meta": {"openclaw_run": "T"}},
    }
    cuts.seen_chat(None, "c", messages, page)  # type: ignore[arg-type]
    if case in ("recovery before the named run", "named run is the recovery"):
        assert "k" not in cuts.by_key and cuts._ending["S"] is cut
        assert cut.recovery == "R" and cut.absorb == "MR"
    else:
        assert cuts.by_key["k"] is cut and not cut.ending and cut.recovery == "T"


async def test_a_run_joined_after_its_tool_call_keeps_the_text_a_crash_lost(tmp_path, mock_clock) -> None:
    """Issue 24, item 5, with a stream joined mid-run (fuzz seed 107665): the run called a tool before owc connected,
    then said a text, and the Gateway crashed. The transcript ends at the tool call (a crash stores nothing of the
    text after it); owc's stream lacks the run's beginning, so where it parts from the transcript (a text where the
    transcript has the call) is no replacement: the message holds the card, the streamed text, then the
    recovery's."""
    async with virtual_time(mock_clock), open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        env.sim.recovery = lambda k, source: [Text("Picked up."), End()]
        run = env.sim.start_run(key, "S", user_text="Do the long job")
        run.tool("exec", {"cmd": "ls"}, "a b")
        await env.connect()
        run.text("Working on it.")
        m = ids.message_id(key, "S")
        await env.emitter.until(lambda: "Working on it." in str(env.emitter.streams.get((chat_id, m))))
        await env.sim.restart("crash")
        with trio.fail_after(PLAY_BOUND_S):
            await env.settled()
        messages = await env.messages(chat_id)
        assert set(messages) == {"u1", m}, "the recovery has no message of its own"
        final = messages[m]
        assert final["done"] is True
        assert final["content"] == f"Working on it.\n{GW}\nPicked up."
        assert [i["type"] for i in final["output"]] == ["function_call", "function_call_output", *["message"] * 3]


@pytest.mark.parametrize("strict", [False, True])
def test_an_illegal_input_to_the_cut_machine_is_recorded_and_changes_nothing(strict: bool) -> None:
    """The driver (``Cuts._feed``) treats a cell the cut machine does not take as the run table treats the
    lifecycle's: a bug, logged and recorded in ``Ledger.illegal`` (the tests fail on it; ``strict`` raises), the cut
    left as it was and still held on its session."""
    from types import SimpleNamespace

    from owc.rules.cut import CutState, IllegalTransition, Uncut
    from owc.rules.owner import Owner, Seen
    from owc.runs.cuts import Cut, Cuts
    from owc.runs.ledger import Ledger

    ledger = Ledger(strict=strict)
    cuts = Cuts(SimpleNamespace(ledger=ledger, wake=lambda: None))  # type: ignore[arg-type]
    ref = ids.SessionRef(agent_id="main", user_id="u", chat_id="c")
    cut = Cut("k", ref, "M", ("S",), Owner.GATEWAY, Seen(terminal=False), "boot-1")
    cut.machine.state = CutState.HELD
    cuts.by_key["k"] = cut
    if strict:
        with pytest.raises(IllegalTransition):
            cuts._feed(None, cut, Uncut())
    else:
        assert cuts._feed(None, cut, Uncut()) == ()
    assert ledger.illegal == ["cut S: Uncut is not an input of a cut in state held"]
    assert cut.machine.state is CutState.HELD and cuts.by_key["k"] is cut
