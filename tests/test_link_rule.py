"""Link rule E (``owc/rules/link.py``; seed 000 section 2.7, case 5): a restart-recovery run writes into the message
of the run it recovers, named by the transcript alone."""

from __future__ import annotations

from typing import Any

import pytest

from owc.protocol import parse_chat_history
from owc.rules.link import (
    Link,
    Verdict,
    before,
    began_before,
    ended_in,
    followed,
    heartbeat_recovered,
    next_run_began,
    recovery_before,
    recovery_owed,
    recovery_source,
    taken_over_first,
)

PROV = {"kind": "internal_system", "sourceTool": "main_session_restart_recovery"}


def user(run: str, text: str = "hi", provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "user", "content": text, "idempotencyKey": f"{run}:user"}
    if provenance is not None:
        m["provenance"] = provenance
    return m


def said(run: str, text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "__openclaw": {"runId": run}}


def history(*messages: dict[str, Any], has_more: bool = False) -> Any:
    return parse_chat_history({"sessionKey": "k", "messages": list(messages), "hasMore": has_more})


def test_a_recovery_links_to_the_newest_non_recovery_turn_before_it() -> None:
    h = history(user("a"), said("a", "one"), user("s"), said("s", "cut"), user("r", "continue", PROV), said("r", "on"))
    link = recovery_source(h, "r")
    assert link.verdict is Verdict.LINKED and link.source == "s"


def test_a_recovery_of_a_recovery_maps_back_to_the_same_source() -> None:
    h = history(user("s"), said("s", "cut"), user("r1", "c", PROV), said("r1", "x"), user("r2", "c", PROV))
    assert recovery_source(h, "r2").source == "s"


def test_a_resume_cut_again_is_the_source_of_its_recovery() -> None:
    resume = "msg-11111111-1111-1111-1111-111111111111-22222222-2222-2222-2222-222222222222-resume-1"
    h = history(user("s"), said("s", "cut"), user(resume, "continue"), user("r", "c", PROV))
    assert recovery_source(h, "r").source == resume


def test_a_run_without_the_provenance_is_its_own() -> None:
    h = history(user("s"), said("s", "cut"), user("r", "a new question"))
    assert recovery_source(h, "r").verdict is Verdict.NOT_RECOVERY
    # Another kind of internal provenance (an inter-session announce) is not a recovery either.
    h = history(user("s"), user("r", "x", {"kind": "inter_session", "sourceTool": "subagent_announce"}))
    assert recovery_source(h, "r").verdict is Verdict.NOT_RECOVERY


def test_a_run_without_a_user_turn_of_its_own_is_no_recovery() -> None:
    # Asked once it has shown something: a recovery's user turn is written as it starts, so this is an agent turn.
    assert recovery_source(history(user("s"), said("s", "cut")), "r").verdict is Verdict.NOT_RECOVERY


def test_an_agent_turn_is_not_named_by_the_transcript() -> None:
    inbound = {"role": "user", "content": "[cron] scheduled turn", "idempotencyKey": "f00d"}
    # Its user turn is keyed by an id of its own and it stored nothing: a recovery of an unnamed run (the caller's
    # cut names it).
    for h in (
        history(user("a"), said("a", "x"), inbound, user("r", "c", PROV)),
        history(user("r", "c", PROV)),
    ):
        link = recovery_source(h, "r")
        assert link.verdict is Verdict.RECOVERY and link.source is None
    # It stored messages under that turn and none ended it: its assistant messages name it (issue 24, item 4: a
    # process that saw it begin, and died before the cut, holds its message).
    h = history(user("a"), said("a", "x"), inbound, said("s", "cut"), user("r", "c", PROV))
    assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # Its last message ended it: the recovered run is one the transcript does not show.
    ended = {**said("s", "all done"), "stopReason": "stop"}
    assert recovery_source(history(user("a"), inbound, ended, user("r", "c", PROV)), "r").verdict is Verdict.RECOVERY
    # Its user turn hidden (an inter-session message): the newest <id>:user is an older run's, and another run
    # stored messages after it: not that run either.
    h = history(user("a"), said("a", "x"), said("s", "cut"), user("r", "c", PROV))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY


def _ended(run: str, text: str, stop_reason: str) -> dict[str, Any]:
    return {**said(run, text), "stopReason": stop_reason}


def test_a_source_whose_last_message_ended_it_is_not_named() -> None:
    """The Gateway recovers runs still running at its boot: a run whose last stored message is its final answer or
    its error had ended, so the recovered run is one the transcript does not show (fuzzer, seeds 17 and 81: an
    inter-session turn or a heartbeat, hidden from chat.history, came after it)."""
    for reason in ("stop", "error"):
        h = history(user("s"), _ended("s", "done", reason), user("r", "continue", PROV))
        assert recovery_source(h, "r").verdict is Verdict.RECOVERY and recovery_source(h, "r").source is None
    # A turn that called a tool, or an aborted partial, leaves the run open to a recovery.
    for reason in ("toolUse", "aborted"):
        h = history(user("s"), _ended("s", "calling", reason), user("r", "continue", PROV))
        assert recovery_source(h, "r").source == "s"


def test_a_hidden_heartbeat_turn_after_the_source_leaves_it_unnamed() -> None:
    """chat.history hides a heartbeat's prompt and marks the next shown message ``turnBoundary`` (measured on
    2026.9.6): the boot may have recovered the heartbeat's run, so the earlier run is not named."""
    r_user = {**user("r", "continue", PROV), "__openclaw": {"turnBoundary": True}}
    h = history(user("s"), said("s", "cut"), r_user)
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    # The mark on a message between them says the same.
    marked = {**said("x", "ok"), "__openclaw": {"runId": "s", "turnBoundary": True}}
    h = history(user("s"), said("s", "cut"), marked, user("r", "continue", PROV))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    # Without the mark the source is named.
    assert recovery_source(history(user("s"), said("s", "cut"), user("r", "c", PROV)), "r").source == "s"


def test_a_cut_heartbeat_that_spoke_is_named_by_its_own_prompts_mark() -> None:
    """Issue 24 item 6: a heartbeat that spoke has its message, as the Gateway's own chat shows it, so a boot's
    recovery of it belongs in that message (rule E). Its prompt is hidden and marks its first message
    ``turnBoundary``: that mark is of the hidden message right before the run's own messages, its own turn, not
    another hidden one among them (fuzz seeds 80279, 80286: a heartbeat called a tool, owc was killed, the
    Gateway restarted; the next process made the heartbeat's message from its transcript and gave the recovery a
    message of its own). Before item 6 a heartbeat had no message, and the mark left it unnamed."""
    tool = {**said("s", ""), "stopReason": "toolUse", "__openclaw": {"runId": "s", "turnBoundary": True}}
    result = {"role": "toolResult", "content": "ok", "toolCallId": "c1"}
    # At the transcript's start (seq 1, the prompt, hidden), and after an earlier turn (seq 3 hidden).
    assert recovery_source(_numbered(tool, result, user("r", "c", PROV), first=2), "r") == Link(Verdict.LINKED, "s")
    h = history(
        _at(user("a"), 1), _at(_ended("a", "x", "stop"), 2), _at(tool, 4), _at(result, 5), _at(user("r", "c", PROV), 6)
    )
    assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # After a silent heartbeat too (its prompt and HEARTBEAT_OK hidden as well: seq 3-5): s is still the one run
    # that stored messages and did not end them.
    h = history(
        _at(user("a"), 1), _at(_ended("a", "x", "stop"), 2), _at(tool, 6), _at(result, 7), _at(user("r", "c", PROV), 8)
    )
    assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # A heartbeat that ended on its own answer is not the one recovered; nor one with a hidden message after it.
    done = {**_ended("s", "All quiet.", "stop"), "__openclaw": {"runId": "s", "turnBoundary": True}}
    assert recovery_source(_numbered(done, user("r", "c", PROV), first=2), "r").verdict is Verdict.RECOVERY
    h = history(_at(tool, 2), _at(result, 3), _at(user("r", "c", PROV), 5))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY


def test_a_source_whose_earlier_recovery_ended_is_not_named_again() -> None:
    """A recovery that finished its source's turn ended the chain: a later boot's recovery is of a run the transcript
    does not show (fuzzer, seed 257: an announce's hidden turn), not of the same source again."""
    h = history(user("s"), said("s", "cut"), user("r1", "c", PROV), _ended("r1", "done", "stop"), user("r2", "c", PROV))
    assert recovery_source(h, "r2").verdict is Verdict.RECOVERY
    # A recovery cut in turn (its last message a tool call) leaves the source named for the next one.
    h = history(user("s"), said("s", "cut"), user("r1", "c", PROV), _ended("r1", "x", "toolUse"), user("r2", "c", PROV))
    assert recovery_source(h, "r2").source == "s"


def test_an_aborted_partial_ends_its_run_and_the_restarts_empty_message_does_not() -> None:
    """A Stop's stored partial (``openclawAbort``, whose stop reason says "stop": measured) ended its run: a later
    recovery is of a run the transcript does not show (fuzzer, seed 854). A restart's empty aborted message
    ("agent run aborted for restart", no ``openclawAbort``) leaves its run to the boot's recovery."""
    partial = {**_ended("s", "half", "stop"), "openclawAbort": {"aborted": True, "origin": "rpc", "runId": "s"}}
    h = history(user("s"), partial, user("r", "continue", PROV))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY and ended_in(h, "s")
    restart = {**_ended("s", "", "aborted"), "errorMessage": "agent run aborted for restart"}
    h = history(user("s"), restart, user("r", "continue", PROV))
    assert recovery_source(h, "r").source == "s" and not ended_in(h, "s")


def test_a_run_followed_by_another_run_is_not_the_one_recovered() -> None:
    """``followed``: another run's turn after the run's last message means the boot recovered that later run
    (fuzzer, seed 1081: the held cut had ended while owc was away, and a later agent turn was cut)."""
    inbound = {"role": "user", "content": "[sessions_send] next", "idempotencyKey": "beef"}
    h = history(user("s"), said("s", "one"), inbound, user("r", "continue", PROV))
    assert followed(h, "s")
    assert not followed(history(user("s"), said("s", "one"), user("r", "continue", PROV), said("r", "on")), "s")
    assert followed(history(user("s"), said("s", "one"), said("x", "other")), "s")
    assert not followed(history(user("a"), said("a", "x")), "s")  # nothing of the run on the page


def test_a_run_taken_over_before_any_recovery_was_not_cut_even_when_its_end_is_hidden() -> None:
    """``taken_over_first``, cell by cell (issue 24 item 3, fuzz seeds 80221 and 80211): the next run began after the
    run's last stored message with no recovery turn between, so no Gateway cut came first, whatever the run's hidden
    end was (a final ``NO_REPLY`` chat.history hides, an abort right after a tool call that stores nothing)."""
    tool = {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "exec"}], "stopReason": "toolUse"}
    tool["__openclaw"] = {"runId": "s"}
    result = {"role": "toolResult", "content": [{"type": "text", "text": "ok"}], "__openclaw": {"runId": "s"}}
    agent_turn = {"role": "user", "content": "[cron] scheduled turn", "idempotencyKey": "beef"}
    heartbeat_error = {**_ended("h", "LLM request failed", "error"), "__openclaw": {"runId": "h", "turnBoundary": True}}
    steered = {"role": "user", "content": "and also this"}  # no key: an input steered into the running run
    # 80211: a cron turn (a key of its own) after s's tool call: s ended before it.
    assert taken_over_first(history(user("s"), tool, result, agent_turn, said("x", "next")), "s")
    # 80221: a heartbeat's run (its hidden prompt marks its first message) after s's tool call.
    assert taken_over_first(history(user("s"), tool, result, heartbeat_error), "s")
    assert taken_over_first(history(user("s"), tool, user("x")), "s")  # a user's next turn
    assert taken_over_first(history(user("s"), said("s", "one"), said("x", "other")), "s")  # another run's message
    # A recovery turn first: the boot continued s (rule E decides), whatever runs after it.
    assert not taken_over_first(history(user("s"), tool, user("r", "continue", PROV), user("x")), "s")
    assert not taken_over_first(history(user("s"), tool, result, steered), "s")  # steered input starts no run
    assert not taken_over_first(history(user("s"), tool, result), "s")  # nothing after s: it may have been cut
    assert not taken_over_first(history(user("a"), said("a", "x")), "s")  # nothing of the run on the page


def test_before_places_a_run_ahead_of_a_later_user_turn() -> None:
    h = history(user("a"), said("a", "x"), user("b"), said("b", "y"))
    assert before(h, "a", "b") and not before(h, "b", "a") and not before(h, "c", "b")


def test_a_hidden_message_between_leaves_the_source_unnamed() -> None:
    """``__openclaw.seq`` numbers the stored transcript and chat.history hides some messages (an announce's user
    turn): a gap between the candidate and the recovery means the recovered run may be the hidden one (fuzzer,
    seed 1569)."""

    def at(message: dict[str, Any], seq: int) -> dict[str, Any]:
        return {**message, "__openclaw": {**(message.get("__openclaw") or {}), "seq": seq}}

    gap = history(at(user("s"), 1), at(said("s", "x"), 2), at(user("r", "c", PROV), 4))
    assert recovery_source(gap, "r").verdict is Verdict.RECOVERY
    none = history(at(user("s"), 1), at(said("s", "x"), 2), at(user("r", "c", PROV), 3))
    assert recovery_source(none, "r").source == "s"


def tool_call(run: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": f"call-{run}", "name": "exec", "arguments": {}}],
        "stopReason": "toolUse",
        "__openclaw": {"runId": run},
    }


def test_a_run_that_began_after_the_held_run_before_any_recovery_says_the_held_run_ended_on_its_own() -> None:
    """``next_run_began`` (issue 24, item 12, fuzz seeds 30151 and 77089): the Gateway recovers a session before it
    runs any turn admitted after the boot, so a later run with no recovery turn before it says the held run ended on
    its own, even when its end stored nothing (an abort after a tool call)."""
    inbound = {"role": "user", "content": "[announce]", "idempotencyKey": "f00d"}
    result = {"role": "toolResult", "toolCallId": "call-s", "toolName": "exec", "content": "ok"}
    steer = {"role": "user", "content": "a sub-agent's result", "provenance": {"kind": "inter_session"}}
    # Cell by cell: the held run s's last message is a tool call (or its result), then a later run x.
    for h in (
        history(user("s"), tool_call("s"), result, user("x"), said("x", "hello")),  # x's own user turn
        history(user("s"), tool_call("s"), result, inbound, said("x", "hello")),  # an agent turn's, keyed its own way
        history(user("s"), tool_call("s"), inbound),  # an agent turn that stored nothing yet (it was recovered)
        history(user("s"), tool_call("s"), said("x", "hello")),  # a run whose user turn is hidden
        history(user("s"), tool_call("s"), user("x")),  # x stored only its user turn (running)
        history(user("s"), tool_call("s"), user("x"), user("r", "c", PROV)),  # x was the one the boot recovered
    ):
        assert next_run_began(h, "s"), h
    # A recovery turn first: rule E decides whose it is (x may be a run after the boot's recovery of s).
    h = history(user("s"), tool_call("s"), user("r", "c", PROV), said("r", "on"), user("x"), said("x", "hello"))
    assert not next_run_began(h, "s")
    # Nothing after s, only a steered input (it starts no run), or s not on the page.
    assert not next_run_began(history(user("s"), tool_call("s"), result), "s")
    assert not next_run_began(history(user("s"), tool_call("s"), steer, user("r", "c", PROV)), "s")
    assert not next_run_began(history(user("x"), said("x", "hello")), "s")
    # Its first later message follows a hidden heartbeat prompt: a heartbeat may run before a pending recovery.
    beat = {**said("x", "tick"), "__openclaw": {"runId": "x", "turnBoundary": True}}
    assert not next_run_began(history(user("s"), tool_call("s"), beat), "s")


def _at(message: dict[str, Any], seq: int) -> dict[str, Any]:
    return {**message, "__openclaw": {**(message.get("__openclaw") or {}), "seq": seq}}


def _numbered(*messages: dict[str, Any], first: int = 1) -> Any:
    return history(*(_at(m, first + i) for i, m in enumerate(messages)))


def test_a_hidden_turn_right_before_one_runs_messages_is_that_runs_own() -> None:
    """An announce's or a ``sessions_send``'s user turn is hidden from chat.history (a ``seq`` gap): the one run whose
    messages follow the gap, not ended, is the run the boot recovered (issue 24 item 4; fuzz seeds 122, 196, 274:
    no living process held its cut, and its recovery got a message of its own)."""
    tool = {**said("s", ""), "stopReason": "toolUse"}
    result = {"role": "toolResult", "content": "ok", "toolCallId": "c1"}
    restart = {**_ended("s", "", "aborted"), "errorMessage": "agent run aborted for restart"}
    # The page starts after the hidden turn (the transcript's first message, seq 1, is hidden).
    for cut in ((tool, result), (tool, result, restart)):
        h = _numbered(*cut, user("r", "c", PROV), said("r", "on"), first=2)
        assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # A hidden turn after an earlier run's messages: the same.
    h = history(
        _at(user("a"), 1), _at(_ended("a", "x", "stop"), 2), _at(tool, 4), _at(result, 5), _at(user("r", "c", PROV), 6)
    )
    assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # Its last message ended it: not the one recovered.
    h = _numbered(_ended("s", "done", "stop"), user("r", "c", PROV), first=2)
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    # Another hidden message after its messages: the recovered run may be that one (seed 1569's case).
    h = history(_at(tool, 2), _at(result, 3), _at(user("r", "c", PROV), 5))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    # Two runs' messages after the gap, or a heartbeat's mark among them (past the first): not named.
    h = _numbered(tool, result, said("x", "other"), user("r", "c", PROV), first=2)
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    later = {**said("s", "more"), "__openclaw": {"runId": "s", "turnBoundary": True}}
    h = _numbered(tool, result, later, user("r", "c", PROV), first=2)
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    # Unnumbered messages: a hidden turn after them could not be told, so not named (as before).
    assert recovery_source(history(tool, result, user("r", "c", PROV)), "r").verdict is Verdict.RECOVERY


def test_runs_that_ended_after_the_cut_one_are_passed_over_on_a_numbered_page() -> None:
    """A run the Gateway admitted between its boot and the delayed recovery ran first and ended on its own (the
    recovery queues behind it, seed 004 "a few seconds after startup"): on a numbered page with nothing hidden, the
    recovered run is the earlier one that did not end (fuzz seeds 48, 135, 241, 40536)."""
    inbound = {"role": "user", "content": "[cron] scheduled turn", "idempotencyKey": "f00d"}
    tool = {**said("s", ""), "stopReason": "toolUse"}
    x_final = _ended("x", "answer", "stop")
    # A keyed turn ended, then the recovery: the cut run before it.
    h = _numbered(user("s"), tool, user("x"), x_final, user("r", "c", PROV))
    assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # The cut run an agent turn (keyed by no run), the one after it hidden (a seq gap before its answer).
    h = history(_at(inbound, 1), _at(tool, 2), _at(x_final, 4), _at(user("r", "c", PROV), 5))
    assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # Two ended runs in between.
    h = _numbered(user("s"), tool, user("x"), x_final, user("y"), _ended("y", "b", "stop"), user("r", "c", PROV))
    assert recovery_source(h, "r") == Link(Verdict.LINKED, "s")
    # Every run ended: unnamed (the recovered run is one the transcript does not show).
    h = _numbered(user("s"), _ended("s", "a", "stop"), user("x"), x_final, user("r", "c", PROV))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    # A turn after the cut run that stored nothing may be the one recovered: not passed over.
    h = _numbered(user("s"), tool, inbound, user("r", "c", PROV))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY
    # Unnumbered: as before, an ended newest run leaves the recovery unnamed.
    h = history(user("s"), tool, user("x"), x_final, user("r", "c", PROV))
    assert recovery_source(h, "r").verdict is Verdict.RECOVERY


def test_the_recovery_owed_is_the_run_a_recovery_arriving_now_would_continue() -> None:
    """``recovery_owed``: a reconcile pass asks whom a restart recovery arriving after the page's newest message would
    continue, so that a delayed one is link-checked in a process that never saw the cut (fuzz seeds 241, 40536)."""
    tool = {**said("s", ""), "stopReason": "toolUse"}
    assert recovery_owed(_numbered(user("s"), tool, user("x"), _ended("x", "a", "stop"))) == "s"
    assert recovery_owed(_numbered(user("s"), _ended("s", "a", "stop"))) is None  # it ended: none is owed
    # The recovery came (and ended): none is owed any more.
    assert recovery_owed(_numbered(user("s"), tool, user("r", "c", PROV), _ended("r", "on", "stop"))) is None
    assert recovery_owed(history()) is None


@pytest.mark.parametrize(
    "case",
    [
        "agent turn",
        "keyed turn",
        "tool result between",
        "another run between",
        "another run's message between",
        "steered input between",
        "seq gap",
        "turn boundary",
        "no recovery",
        "not on the page",
    ],
)
def test_the_recovery_right_before_a_run_is_named_only_with_nothing_else_between(case: str) -> None:
    """Fuzz seed 41332 (shrunk): the boot's recovery R ran, then a run T admitted after the boot; a later boot's row
    named T, which is no recovery. The recovery the Gateway ran right before T began (``recovery_before``) is R, with
    nothing between but R's own messages (a tool result among them); anything else between (another run's turn or
    message, a steered input, a hidden message by a ``seq`` gap or a ``turnBoundary`` mark) or no recovery turn
    names none: S's turn (or a trace of it) between would say R is an earlier boot's."""
    cron = {"role": "user", "content": "[cron] scheduled turn", "idempotencyKey": "f00d"}
    s_turn = {"role": "user", "content": "[inter-session] do it", "idempotencyKey": "beef"}
    tool = {"role": "toolResult", "content": [{"type": "text", "text": "ok"}], "toolCallId": "c1"}
    between: list[dict[str, Any]] = {
        "tool result between": [tool],
        "another run between": [s_turn],
        "another run's message between": [said("Q", "mine")],
        "steered input between": [{"role": "user", "content": "also this"}],
    }.get(case, [])
    r_turn = user("R", "continue", PROV) if case != "no recovery" else user("R", "a question")
    t_first: list[dict[str, Any]] = [user("T", "hi")] if case == "keyed turn" else [cron, said("T", "two")]
    if case == "turn boundary":
        t_first[0] = {**t_first[0], "__openclaw": {"turnBoundary": True}}
    page = [s_turn, r_turn, said("R", "on"), *between, *t_first]
    if case == "seq gap":
        page = [{**m, "__openclaw": {**m.get("__openclaw", {}), "seq": i + (i >= 3)}} for i, m in enumerate(page)]
    if case == "not on the page":
        page = page[:3]
    expected = "R" if case in ("agent turn", "keyed turn", "tool result between") else None
    assert recovery_before(history(*page), "T") == expected


def test_a_heartbeat_that_stored_nothing_but_its_prompt_right_before_the_recovery_is_the_one_recovered() -> None:
    """Fuzz seed 150240: a run ended on its own after a tool call (no ending message stored), a heartbeat began, a
    crash cut it before it stored anything but its hidden prompt, and the boot recovered the heartbeat. The
    recovery's turn carries the prompt's ``turnBoundary`` mark and ``seq`` skips exactly one number: the held run
    ``s`` is not the one recovered (one run at a time: the heartbeat began after ``s`` ended; a heartbeat that
    ends on its own stores its reply or its error)."""
    marked = {**user("r", "continue", PROV), "__openclaw": {"turnBoundary": True}}
    result = {"role": "toolResult", "content": "ok", "toolCallId": "c1"}
    page = history(_at(user("s"), 1), _at(tool_call("s"), 2), _at(result, 3), _at(marked, 5))
    assert recovery_source(page, "r").verdict is Verdict.RECOVERY  # unnamed, as before: the heartbeat's id is hidden
    assert heartbeat_recovered(page, "s", "r")
    # Two hidden messages (the heartbeat's bare acknowledgement too: it ended on its own), no mark (an announce's
    # turn, no heartbeat's), no numbers, or a held run the page does not show (it may be the heartbeat): not so.
    assert not heartbeat_recovered(history(_at(user("s"), 1), _at(tool_call("s"), 2), _at(marked, 5)), "s", "r")
    plain = _at(user("r", "continue", PROV), 4)
    assert not heartbeat_recovered(history(_at(user("s"), 1), _at(tool_call("s"), 2), plain), "s", "r")
    assert not heartbeat_recovered(history(user("s"), tool_call("s"), marked), "s", "r")
    assert not heartbeat_recovered(page, "h", "r")
    assert not heartbeat_recovered(history(_at(marked, 5)), "s", "r")


def test_began_before_reads_each_run_s_first_message() -> None:
    """``began_before`` (fuzz seed 399767): the sent run S's turn and tool call, then an announce A whose turn is
    hidden (its tool call is its first message), then S's recovery naming S. S began before A; A did not begin
    before S; a run the page does not hold began before nothing, and nothing before it."""
    page = history(user("S", "do it"), tool_call("S"), tool_call("A"), user("R", "resume", PROV))
    assert began_before(page, "S", "A")
    assert not began_before(page, "A", "S")
    assert not began_before(page, "S", "X") and not began_before(page, "X", "S")
