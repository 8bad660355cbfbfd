"""The oracle is tested too: a clean play passes it, and each of its checks catches a database spoiled by hand in
the one way that check is about (the rest of the database kept consistent, so only that check may fire)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from owc.sim.play import Played, play_scenario

from fuzzing import judge, virtual_time
from oracle import CUT_OFF, SEAMS, check_database, check_expected, expected_message_id, kind_of
from schedules import build

SCENARIO = """
{"op": "chat", "chat": "a", "user": "u0"}
{"op": "key", "name": "main", "key": "agent:main:main"}
{"op": "run", "chat": "a", "run": "beat", "heartbeat": true, "origin": "heartbeat"}
{"op": "text", "run": "beat", "text": "All quiet."}
{"op": "end", "run": "beat"}
{"op": "run", "chat": "a", "run": "r1"}
{"op": "text", "run": "r1", "text": "First answer."}
{"op": "tool", "run": "r1", "name": "exec", "args": {"cmd": "ls"}, "result": "ok"}
{"op": "text", "run": "r1", "text": "After the tool."}
{"op": "end", "run": "r1"}
{"op": "run", "chat": "a", "run": "r2"}
{"op": "text", "run": "r2", "text": "Second answer."}
{"op": "end", "run": "r2"}
{"op": "run", "chat": "a", "run": "ack", "heartbeat": true, "origin": "heartbeat"}
{"op": "text", "run": "ack", "text": "HEARTBEAT_OK"}
{"op": "end", "run": "ack"}
{"op": "run", "chat": "a", "run": "quiet"}
{"op": "text", "run": "quiet", "text": "NO_REPLY"}
{"op": "end", "run": "quiet"}
{"op": "run", "key": "main", "run": "elsewhere"}
{"op": "text", "run": "elsewhere", "text": "Not for the chat."}
{"op": "end", "run": "elsewhere"}
{"op": "wait"}
"""


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> tuple[Played, Path]:
    db = tmp_path_factory.mktemp("oracle") / "clean.db"
    played = trio.run(play_scenario, SCENARIO, f"sqlite:///{db}")
    return played, db


class Spoiled:
    """A copy of the clean database, and the ids a test needs to spoil it."""

    def __init__(self, baseline: tuple[Played, Path], tmp_path: Path) -> None:
        self.played, clean = baseline
        self.db = tmp_path / "spoiled.db"
        shutil.copy(clean, self.db)
        self.spec = self.played.player.chats["a"]
        self.chat_id, self.key = self.spec.chat_id, self.spec.session_key
        self.run_ids = self.played.player.run_ids

    def mid(self, run: str) -> str:
        mid = expected_message_id(self.key, self.run_ids[run])
        assert mid is not None
        return mid

    def edit(self, change: Callable[[dict[str, Any]], None], *, mirror: bool = True) -> None:
        """Change the chat JSON (``change`` gets its history) and write it back with its ``current_message_id``;
        with ``mirror`` the ``chat_message`` rows are rewritten to match, so only the tree itself is spoiled."""
        with sqlite3.connect(self.db) as con:
            (raw,) = con.execute("SELECT chat FROM chat WHERE id = ?", (self.chat_id,)).fetchone()
            chat = json.loads(raw)
            change(chat["history"])
            current = chat["history"].get("currentId")
            con.execute(
                "UPDATE chat SET chat = ?, current_message_id = ? WHERE id = ?",
                (json.dumps(chat), current, self.chat_id),
            )
            if mirror:
                con.execute("DELETE FROM chat_message WHERE chat_id = ?", (self.chat_id,))
                for mid, m in chat["history"]["messages"].items():
                    con.execute(
                        "INSERT INTO chat_message (id, chat_id, role, parent_id, content, done) VALUES (?,?,?,?,?,?)",
                        (
                            f"{self.chat_id}-{mid}",
                            self.chat_id,
                            m.get("role"),
                            m.get("parentId"),
                            json.dumps(m.get("content")),
                            bool(m.get("done", True)),
                        ),
                    )

    def sql(self, statement: str, *args: Any) -> None:
        with sqlite3.connect(self.db) as con:
            con.execute(statement, args)

    def problems(self, **kwargs: Any) -> list[str]:
        return check_database(self.played.player.sim, f"sqlite:///{self.db}", {self.chat_id: "a"}, **kwargs)

    def kinds(self, **kwargs: Any) -> set[str]:
        return {kind_of(p) for p in self.problems(**kwargs)}


@pytest.fixture
def spoiled(baseline, tmp_path) -> Spoiled:
    return Spoiled(baseline, tmp_path)


def _append(history: dict[str, Any], mid: str, run_id: str | None, *, done: bool = True, text: str = "x") -> None:
    """A message at the chain's tail."""
    tail = history["currentId"]
    history["messages"][tail]["childrenIds"].append(mid)
    meta = {"openclaw_run": run_id} if run_id else {}
    history["messages"][mid] = {
        "id": mid, "parentId": tail, "childrenIds": [], "role": "assistant", "content": text, "done": done,
        "meta": meta, "output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}],
    }  # fmt: skip
    history["currentId"] = mid


def test_a_clean_play_passes(spoiled: Spoiled) -> None:
    assert spoiled.problems() == []
    messages = spoiled.played.chats["a"]
    # The heartbeat that spoke has its message, as the Gateway's own chat shows it (issue 24 item 6); the one that
    # only acknowledged, quiet and elsewhere showed nothing here.
    assert set(messages) == {spoiled.mid("beat"), spoiled.mid("r1"), spoiled.mid("r2")}
    chats = {"a": (spoiled.chat_id, spoiled.key, messages)}
    expect = {"beat": "show", "r1": "show", "r2": "show", "ack": "silent", "quiet": "silent", "elsewhere": "silent"}
    order = {"a": ["beat", "r1", "r2", "ack", "quiet"]}
    assert check_expected(expect, order, spoiled.played.player.sim, spoiled.run_ids, chats) == []


def test_a_run_that_showed_text_and_has_no_message_is_missing(spoiled: Spoiled) -> None:
    r1, r2 = spoiled.mid("r1"), spoiled.mid("r2")

    def drop(history: dict[str, Any]) -> None:
        del history["messages"][r2]
        history["messages"][r1]["childrenIds"] = []
        history["currentId"] = r1

    spoiled.edit(drop)
    assert spoiled.kinds() == {"missing"}


def test_an_ended_runs_message_left_open_is_unfinished(spoiled: Spoiled) -> None:
    spoiled.edit(lambda h: h["messages"][spoiled.mid("r2")].update(done=False))
    assert spoiled.kinds() == {"unfinished"}
    # The owner rule's exemption (issue 14) is the caller's to grant, run by run.
    assert spoiled.problems(may_stay_open=lambda message, run: run.run_id == spoiled.run_ids["r2"]) == []


def test_any_message_open_after_quiescence_is_unfinished_except_a_placeholder_no_run_names(spoiled: Spoiled) -> None:
    spoiled.edit(lambda h: _append(h, "placeholder-of-a-dead-request", None, done=False))
    assert spoiled.problems() == []  # nothing exists that could finish it
    named = expected_message_id(spoiled.key, spoiled.run_ids["quiet"])
    spoiled.edit(lambda h: _append(h, named, None, done=False))  # the id of a run that said only NO_REPLY
    assert spoiled.kinds() == {"unfinished"}


def test_a_heartbeat_that_spoke_and_has_no_message_is_missing(spoiled: Spoiled) -> None:
    """Issue 24 item 6: a heartbeat's reply is required, as any run's (before, the oracle allowed its message only
    where the transcript could not tell it from another run's, and never required it)."""
    beat, r1 = spoiled.mid("beat"), spoiled.mid("r1")

    def drop(history: dict[str, Any]) -> None:
        messages = history["messages"]
        root = messages.pop(beat)["parentId"]
        messages[r1]["parentId"] = root
        if root is not None:
            messages[root]["childrenIds"] = [r1]

    spoiled.edit(drop)
    assert spoiled.kinds() == {"missing"}


def test_a_message_that_shows_a_heartbeats_prompt_is_content(spoiled: Spoiled) -> None:
    beat = spoiled.mid("beat")
    spoiled.edit(lambda h: h["messages"][beat].update(content="[OpenClaw heartbeat poll]\n\nAll quiet."))
    assert spoiled.kinds() == {"content"}


@pytest.mark.parametrize("run", ["ack", "quiet"])
def test_a_run_that_must_not_show_has_no_message(spoiled: Spoiled, run: str) -> None:
    spoiled.edit(lambda h: _append(h, spoiled.mid(run), spoiled.run_ids[run]))
    assert spoiled.kinds() == {"silent"}


def test_a_run_of_another_key_has_no_message_in_a_chat(spoiled: Spoiled) -> None:
    spoiled.edit(lambda h: _append(h, "m-elsewhere", spoiled.run_ids["elsewhere"], text="Not for the chat."))
    assert spoiled.kinds() == {"silent"}


def test_two_messages_of_one_run_are_duplicates(spoiled: Spoiled) -> None:
    r1, r2 = spoiled.mid("r1"), spoiled.mid("r2")

    def twin(history: dict[str, Any]) -> None:
        copy = json.loads(json.dumps(history["messages"][r2]))
        copy["id"] = "twin"
        history["messages"]["twin"] = copy
        history["messages"][r1]["childrenIds"].append("twin")  # a sibling variant of r2

    spoiled.edit(twin)
    problems = spoiled.problems()
    assert "duplicate" in {kind_of(p) for p in problems}
    assert any("sibling variant" in p for p in problems) and any("has 2 messages" in p for p in problems)


def test_a_lost_card_or_a_changed_text_is_content(spoiled: Spoiled) -> None:
    r1 = spoiled.mid("r1")

    def lose_card(history: dict[str, Any]) -> None:
        message = history["messages"][r1]
        message["output"] = [i for i in message["output"] if i["type"] != "function_call"]

    spoiled.edit(lose_card)
    assert spoiled.kinds() == {"content"}


def test_texts_out_of_the_transcripts_order_are_content(spoiled: Spoiled) -> None:
    r1 = spoiled.mid("r1")

    def swap(history: dict[str, Any]) -> None:
        items = history["messages"][r1]["output"]
        texts = [i for i in items if i["type"] == "message"]
        texts[0]["content"], texts[1]["content"] = texts[1]["content"], texts[0]["content"]

    spoiled.edit(swap)
    assert spoiled.kinds() == {"content", "streamed"}  # what it streamed is out of order too


def test_a_text_missing_from_the_content_is_content(spoiled: Spoiled) -> None:
    spoiled.edit(lambda h: h["messages"][spoiled.mid("r2")].update(content="Something else."))
    assert spoiled.kinds() == {"content"}


def test_runs_chained_against_their_start_order_are_out_of_order(spoiled: Spoiled) -> None:
    r1, r2 = spoiled.mid("r1"), spoiled.mid("r2")

    def swap(history: dict[str, Any]) -> None:
        m = history["messages"]
        root = m[r1]["parentId"]
        m[r2]["parentId"], m[r2]["childrenIds"] = root, [r1]
        m[r1]["parentId"], m[r1]["childrenIds"] = r2, []
        if root is not None:
            m[root]["childrenIds"] = [r2]
        history["currentId"] = r1

    spoiled.edit(swap)
    assert spoiled.kinds() == {"order"}
    chats = {"a": (spoiled.chat_id, spoiled.key, json.loads(_chat_json(spoiled))["history"]["messages"])}
    found = check_expected({}, {"a": ["r1", "r2"]}, spoiled.played.player.sim, spoiled.run_ids, chats)
    assert [kind_of(p) for p in found] == ["order"]


def _chat_json(spoiled: Spoiled) -> str:
    with sqlite3.connect(spoiled.db) as con:
        return con.execute("SELECT chat FROM chat WHERE id = ?", (spoiled.chat_id,)).fetchone()[0]


def test_current_message_id_that_is_not_current_id_is_a_tree_fault(spoiled: Spoiled) -> None:
    spoiled.sql("UPDATE chat SET current_message_id = ? WHERE id = ?", spoiled.mid("r1"), spoiled.chat_id)
    assert spoiled.kinds() == {"tree"}


def test_a_current_id_that_is_not_the_tail_is_a_tree_fault(spoiled: Spoiled) -> None:
    spoiled.edit(lambda h: h.update(currentId=spoiled.mid("r1")))
    assert "tree" in spoiled.kinds()


def test_a_dangling_parent_is_a_tree_fault(spoiled: Spoiled) -> None:
    spoiled.edit(lambda h: h["messages"][spoiled.mid("r2")].update(parentId="gone"))
    assert "tree" in spoiled.kinds()


def test_a_child_that_does_not_point_back_is_a_tree_fault(spoiled: Spoiled) -> None:
    spoiled.edit(lambda h: h["messages"][spoiled.mid("r2")]["childrenIds"].append(spoiled.mid("r1")))
    assert "tree" in spoiled.kinds()


def test_a_mirror_row_that_differs_is_a_mirror_fault(spoiled: Spoiled) -> None:
    row = f"{spoiled.chat_id}-{spoiled.mid('r2')}"
    spoiled.sql("UPDATE chat_message SET done = 0 WHERE id = ?", row)
    assert spoiled.kinds() == {"mirror"}
    spoiled.sql("UPDATE chat_message SET done = 1, content = ? WHERE id = ?", json.dumps("stale"), row)
    assert spoiled.kinds() == {"mirror"}
    spoiled.sql("UPDATE chat_message SET content = ?, parent_id = NULL WHERE id = ?", json.dumps("Second answer."), row)
    assert spoiled.kinds() == {"mirror"}


def test_a_missing_or_extra_mirror_row_is_a_mirror_fault(spoiled: Spoiled) -> None:
    spoiled.sql("DELETE FROM chat_message WHERE id = ?", f"{spoiled.chat_id}-{spoiled.mid('r2')}")
    assert spoiled.kinds() == {"mirror"}
    spoiled.edit(lambda h: None)  # mirror rebuilt
    assert spoiled.problems() == []
    spoiled.sql(
        "INSERT INTO chat_message (id, chat_id, role, done) VALUES (?, ?, 'assistant', 1)",
        f"{spoiled.chat_id}-x",
        spoiled.chat_id,
    )
    assert spoiled.kinds() == {"mirror"}


def test_the_generators_expectations_are_checked(spoiled: Spoiled) -> None:
    chats = {"a": (spoiled.chat_id, spoiled.key, spoiled.played.chats["a"])}
    sim, ids = spoiled.played.player.sim, spoiled.run_ids
    found = check_expected({"r1": "silent", "ack": "show"}, {}, sim, ids, chats)
    assert len(found) == 2 and {kind_of(p) for p in found} == {"expected"}


# ---------------------------------------------------------------------- issue 24: what a message says

CUT_SCENARIO = """
{"op": "chat", "chat": "a", "user": "u0"}
{"op": "run", "chat": "a", "run": "failed"}
{"op": "text", "run": "failed", "text": "Before the error."}
{"op": "end", "run": "failed", "state": "error", "error": "boom"}
{"op": "run", "chat": "a", "run": "cut"}
{"op": "text", "run": "cut", "text": "Live only."}
{"op": "restart", "mode": "restart"}
{"op": "await_clients", "count": 1}
{"op": "wait"}
"""


@pytest.fixture(scope="module")
def cut_baseline(tmp_path_factory) -> tuple[Played, Path]:
    """A run that ends with its own error (live), and a run a Gateway restart cut after it streamed text the
    transcript lost, continued by the boot's recovery in its message (link rule E)."""
    db = tmp_path_factory.mktemp("oracle-cut") / "clean.db"
    played = trio.run(play_scenario, CUT_SCENARIO, f"sqlite:///{db}")
    return played, db


@pytest.fixture
def cut(cut_baseline, tmp_path) -> Spoiled:
    return Spoiled(cut_baseline, tmp_path)


def _recovery(spoiled: Spoiled) -> Any:
    sim = spoiled.played.player.sim
    return next(r for r in sim.runs.values() if r.recovers == spoiled.run_ids["cut"])


def test_the_oracles_cut_off_note_is_owcs() -> None:
    from owc.rules.owner import CUT_OFF as OWCS

    assert CUT_OFF == OWCS


def test_a_clean_play_with_an_error_and_a_linked_recovery_passes(cut: Spoiled) -> None:
    assert cut.problems() == []
    sim = cut.played.player.sim
    assert sim.runs[cut.run_ids["failed"]].error == "boom"  # the simulator's ground truth, for the oracle
    assert sim.runs[cut.run_ids["cut"]].cut_by == "restart"
    assert "Live only." in sim.runs[cut.run_ids["cut"]].streamed.get("owc", "")  # streamed, the transcript lost it
    message = cut.played.chats["a"][cut.mid("failed")]
    assert message["error"] == {"content": "boom"}


def test_a_message_without_its_runs_error_is_an_error_fault(cut: Spoiled) -> None:
    """Rule 1: the run's error, whether owc saw it live or not, in the words a live error gives."""
    cut.edit(lambda h: h["messages"][cut.mid("failed")].pop("error"))
    assert cut.kinds() == {"error"}
    cut.edit(lambda h: h["messages"][cut.mid("failed")].update(error={"content": "The run failed."}))
    assert cut.kinds() == {"error"}


def test_the_cut_off_note_where_nothing_was_cut_is_a_cutoff_fault(cut: Spoiled, monkeypatch) -> None:
    """Rule 2: the note only on a run a restart cut and nobody continued; never in place of its own error."""
    note = {"content": f"{CUT_OFF}: the Gateway stopped under it, and a newer run took over the session."}
    cut.edit(lambda h: h["messages"][cut.mid("failed")].update(error=note))
    problems = cut.problems()
    assert {kind_of(p) for p in problems} == {"cutoff"} and "replaces run" in problems[0]
    cut.edit(lambda h: h["messages"][cut.mid("cut")].update(error=note))  # its recovery continued it
    assert {kind_of(p) for p in cut.problems()} == {"cutoff"} and len(cut.problems()) == 2
    # The same note on a run a restart cut that nobody continued is right.
    sim = cut.played.player.sim
    failed = sim.runs[cut.run_ids["failed"]]
    monkeypatch.setattr(failed, "cut_by", "crash")
    monkeypatch.setattr(failed, "error", None)
    cut.edit(lambda h: h["messages"][cut.mid("cut")].pop("error"))
    assert cut.problems() == []


def test_a_message_with_less_than_was_streamed_is_a_streamed_fault(cut: Spoiled) -> None:
    """Rule 3: the cut run streamed "Live only." and its transcript lost it: the message must keep it (the
    transcript-only checks cannot see this)."""

    def lose(history: dict[str, Any]) -> None:
        message = history["messages"][cut.mid("cut")]
        # (and the seam after it, which then has nothing before it: owc would put none there)
        message["output"] = [i for i in message["output"] if "Live only." not in json.dumps(i)]
        message["output"] = [i for i in message["output"] if not str(i.get("id")).startswith("seam_")]
        message["content"] = message["content"].replace("Live only.", "").strip()

    cut.edit(lose)
    problems = cut.problems()
    assert {kind_of(p) for p in problems} == {"streamed"}, problems
    assert "'Live only.'" in problems[0]


def test_a_recovery_with_a_message_of_its_own_is_a_recovery_fault(cut: Spoiled) -> None:
    """Rule 4: the boot's recovery of a cut run owc holds a message of belongs in that message."""
    recovery = _recovery(cut)
    own = expected_message_id(cut.key, recovery.run_id)
    assert own is not None

    def split(history: dict[str, Any]) -> None:
        meta = history["messages"][cut.mid("cut")]["meta"]
        meta["openclaw_chain"] = [r for r in meta.get("openclaw_chain") or [] if r != recovery.run_id]
        _append(history, own, recovery.run_id, text="Recovered after the Gateway restart.")

    cut.edit(split)
    problems = cut.problems()
    assert "recovery" in {kind_of(p) for p in problems}, problems
    assert any("has a message of its own" in p for p in problems)


def test_the_oracles_seams_are_owcs() -> None:
    from owc.render.seam import RECOVERED, RESUMED, SEAM_TEXTS

    assert SEAMS == {SEAM_TEXTS[RECOVERED]: "recovery", SEAM_TEXTS[RESUMED]: "resume"}


def _seam(kind: str = "recovery") -> dict[str, Any]:
    text = next(t for t, k in SEAMS.items() if k == kind)
    return {"type": "message", "id": "seam_x", "content": [{"type": "output_text", "text": text}]}


def test_a_continued_message_marks_its_seam_exactly_there(cut: Spoiled) -> None:
    """Rule 6 (issue 25 item 3): the cut run's message, continued by the boot's recovery, holds the seam between the
    two runs' parts (the clean play); without it, or with it moved, doubled, of the wrong kind, or in a message of one
    run, it is a seam fault."""
    message = cut.played.chats["a"][cut.mid("cut")]
    output = message["output"]
    at = next(i for i, item in enumerate(output) if str(item.get("id")).startswith("seam_"))
    assert 0 < at < len(output) - 1, "the clean play has it between the two parts"

    def with_output(change: Callable[[list[Any]], list[Any]], mid: str | None = None) -> set[str]:
        cut.edit(lambda h: h["messages"][mid or cut.mid("cut")].update(output=change(list(output))))
        return cut.kinds()

    assert with_output(lambda o: o[:at] + o[at + 1 :]) == {"seam"}, "no seam between the two runs' parts"
    assert with_output(lambda o: [o[at], *o[:at], *o[at + 1 :]]) == {"seam"}, "a seam first"
    assert with_output(lambda o: [*o[:at], *o[at + 1 :], o[at]]) == {"seam"}, "a seam last"
    assert with_output(lambda o: [*o[: at + 1], o[at], *o[at + 1 :]]) == {"seam"}, "two in a row"
    assert with_output(lambda o: [*o[:at], _seam("resume"), *o[at + 1 :]]) == {"seam"}, "owc's words for a recovery"
    cut.edit(lambda h: h["messages"][cut.mid("cut")].update(output=output))
    assert cut.problems() == []
    single = cut.played.chats["a"][cut.mid("failed")]["output"]
    cut.edit(lambda h: h["messages"][cut.mid("failed")].update(output=[*single, _seam()]))
    assert cut.kinds() == {"seam"}, "a message of one run has no seam"


def test_a_finished_message_with_a_spinning_status_line_is_a_status_fault(spoiled: Spoiled) -> None:
    """Rule 7 (issue 25 item 2): a finished message keeps no open status line."""
    lines = [{"description": "Running exec...", "done": False}, {"description": "exec done", "done": True}]
    spoiled.edit(lambda h: h["messages"][spoiled.mid("r1")].update(statusHistory=lines))
    assert spoiled.problems() == []
    spoiled.edit(lambda h: h["messages"][spoiled.mid("r1")].update(statusHistory=lines[:1]))
    assert spoiled.kinds() == {"status"}
    spoiled.edit(lambda h: h["messages"][spoiled.mid("r1")].update(statusHistory=[{"done": True}]))
    assert spoiled.kinds() == {"status"}


async def test_a_play_that_never_settles_is_a_hang(monkeypatch, tmp_path: Path, mock_clock) -> None:
    """Rule 5: a wait that can never end is a failure of its own, found on the virtual clock (no real wait)."""
    import owc.sim.play

    async def never(self) -> None:  # owc never says it has finished its runs
        await trio.sleep_forever()  # timer-ok: the hang under test

    monkeypatch.setattr(owc.sim.play.Deployments, "settled", never)
    schedule = build([{"op": "run", "run": "r1", "chat": "a"}, {"op": "text", "run": "r1", "text": "Hi."}])
    async with virtual_time(mock_clock):
        problems = await judge(schedule, tmp_path / "webui.db")
    assert [kind_of(p) for p in problems] == ["hang"], problems
    assert "hung" in problems[0] and "virtual clock" in problems[0] and "line" in problems[0]


# ---------------------------------------------------------------------- a link nothing owc reads can tell (seed 150995)

#: Fuzz seed 150995 shrunk: the cron run r2 calls a tool while owc is away and ends ``aborted`` right after it (an
#: abort right after a tool call stores nothing), an announce r13 begins (its turn hidden from chat.history), a crash
#: under it: the boot recovers r13. STEERED: the same, but the completion is steered into r2 still running: the boot
#: recovers r2. owc reads the same page and the same row in both (``indistinct_link``) and links the recovery into
#: r2's message, which it holds cut: right in STEERED, wrong in NEW_RUN.
_HIDDEN_TURN_START = """
{"op": "chat", "chat": "b", "user": "u1"}
{"op": "connect", "deploy": "owc"}
{"op": "run", "run": "r2", "chat": "b", "origin": "cron"}
{"op": "disconnect"}
{"op": "tool", "run": "r2", "name": "exec", "args": {"i": 3}, "result": "ok"}
"""
_HIDDEN_TURN_END = """
{"op": "restart", "mode": "crash"}
{"op": "await_clients", "count": 1}
{"op": "wait"}
{"op": "expect", "run": "r2", "contains": "Recovered after the Gateway restart.", "done": true, "cards": 1}
{"op": "expect", "chat": "b", "count": 1}
"""
NEW_RUN = (
    _HIDDEN_TURN_START
    + """{"op": "end", "run": "r2", "state": "aborted"}
{"op": "run", "run": "r13", "chat": "b", "origin": "subagent_announce"}"""
    + _HIDDEN_TURN_END
)
STEERED = (
    _HIDDEN_TURN_START + """{"op": "steer", "run": "r2", "text": "[Subagent completed] done."}""" + _HIDDEN_TURN_END
)


#: Fuzz seed 371031 shrunk: as NEW_RUN, but r2 ends ``final`` with a silent reply (``NO_REPLY``, hidden from
#: chat.history like the completion) before the announce begins its own run, and a stop-mode restart cuts that run.
#: STEERED_TWICE: two completions steered into r2 still running. The same page again: two hidden messages after r2's
#: tool result in both.
_SILENT_START = """
{"op": "chat", "chat": "b", "user": "u1"}
{"op": "connect", "deploy": "owc"}
{"op": "run", "run": "r2", "chat": "b", "origin": "cron"}
{"op": "tool", "run": "r2", "name": "exec", "args": {"i": 4}, "result": "ok"}
{"op": "disconnect"}
"""
_SILENT_END = """
{"op": "restart", "mode": "stop"}
{"op": "await_clients", "count": 1}
{"op": "wait"}
{"op": "expect", "run": "r2", "contains": "Recovered after the Gateway restart.", "done": true, "cards": 1}
{"op": "expect", "chat": "b", "count": 1}
"""
SILENT_NEW_RUN = (
    _SILENT_START
    + """{"op": "text", "run": "r2", "text": "NO_REPLY"}
{"op": "end", "run": "r2", "state": "final"}
{"op": "run", "run": "r5", "chat": "b", "origin": "subagent_announce"}"""
    + _SILENT_END
)
STEERED_TWICE = (
    _SILENT_START
    + """{"op": "steer", "run": "r2", "text": "[Subagent completed] one."}
{"op": "steer", "run": "r2", "text": "[Subagent completed] two."}"""
    + _SILENT_END
)


def _page_shape(played: Played) -> list[tuple[Any, ...]]:
    """What ``chat.history`` shows owc of chat b's session, with run ids named by the run's role (the cut one, the
    recovery) so that two plays compare."""
    from owc.sim.rpc import project_history

    sim = played.player.sim
    (session,) = (s for s in sim.sessions.values() if s.transcript)
    r2 = played.player.run_ids["r2"]
    recovery = next(r.run_id for r in sim.runs.values() if getattr(r, "origin", None) == "recovery")
    names = {r2: "S", recovery: "R'"}

    def name(value: Any) -> Any:
        return names.get(str(value).removesuffix(":user"), "other") if value else None

    return [
        (
            m.get("role"),
            (m.get("__openclaw") or {}).get("seq"),
            (m.get("__openclaw") or {}).get("turnBoundary"),
            name((m.get("__openclaw") or {}).get("runId")),
            name(m.get("idempotencyKey")) if str(m.get("idempotencyKey") or "").endswith(":user") else None,
            (m.get("provenance") or {}).get("sourceTool"),
            m.get("stopReason"),
        )
        for _, m in project_history(session.transcript)
    ]


@pytest.mark.parametrize("text", [NEW_RUN, STEERED], ids=["new-run", "steered"])
def test_a_recovery_linked_where_nothing_owc_reads_tells_which_run_it_recovers_passes(text: str, tmp_path) -> None:
    played = trio.run(play_scenario, text, f"sqlite:///{tmp_path / 'owc.db'}")
    sim = played.player.sim
    assert played.failures == [] and played.missing == []  # the recovery is in r2's message, in both
    chat = played.player.chats["b"]
    assert check_database(sim, f"sqlite:///{tmp_path / 'owc.db'}", {chat.chat_id: "b"}) == []
    recovery = next(r for r in sim.runs.values() if getattr(r, "origin", None) == "recovery")
    truth = sim.runs[recovery.recovers]
    assert (truth.run_id == played.player.run_ids["r2"]) is (text == STEERED)  # the ground truth differs


def test_both_plays_show_owc_the_same_page(tmp_path) -> None:
    new_run = trio.run(play_scenario, NEW_RUN, f"sqlite:///{tmp_path / 'a.db'}")
    steered = trio.run(play_scenario, STEERED, f"sqlite:///{tmp_path / 'b.db'}")
    assert _page_shape(new_run) == _page_shape(steered)
    assert [s[:2] for s in _page_shape(new_run)] == [("user", 1), ("assistant", 2), ("toolResult", 3), ("user", 5),
                                                     ("assistant", 6)]  # fmt: skip


@pytest.mark.parametrize("text", [SILENT_NEW_RUN, STEERED_TWICE], ids=["silent-new-run", "steered-twice"])
def test_a_recovery_linked_after_a_hidden_silent_reply_passes(text: str, tmp_path) -> None:
    played = trio.run(play_scenario, text, f"sqlite:///{tmp_path / 'owc.db'}")
    sim = played.player.sim
    assert played.failures == [] and played.missing == []
    chat = played.player.chats["b"]
    assert check_database(sim, f"sqlite:///{tmp_path / 'owc.db'}", {chat.chat_id: "b"}) == []
    recovery = next(r for r in sim.runs.values() if getattr(r, "origin", None) == "recovery")
    assert (recovery.recovers == played.player.run_ids["r2"]) is (text == STEERED_TWICE)


def test_a_hidden_silent_reply_shows_owc_the_page_two_steered_completions_do(tmp_path) -> None:
    silent = trio.run(play_scenario, SILENT_NEW_RUN, f"sqlite:///{tmp_path / 'a.db'}")
    steered = trio.run(play_scenario, STEERED_TWICE, f"sqlite:///{tmp_path / 'b.db'}")
    assert _page_shape(silent) == _page_shape(steered)
    assert [s[:2] for s in _page_shape(silent)][:4] == [("user", 1), ("assistant", 2), ("toolResult", 3), ("user", 6)]


def _indistinct_cell(between: list[dict[str, Any]], *, last: dict[str, Any] | None = None, truth_says: bool = False):
    from types import SimpleNamespace

    from oracle import indistinct_link

    s_msgs = [
        {"role": "user", "idempotencyKey": "cron-turn", "content": "[cron] scheduled turn"},
        last or {"role": "toolResult", "__openclaw": {"runId": "S"}, "content": [{"type": "text", "text": "ok"}]},
    ]
    truth = [{"role": "assistant", "__openclaw": {"runId": "X"}, "stopReason": "stop", "content": "Hi."}]
    turn = {"role": "user", "idempotencyKey": "R:user", "provenance": {"sourceTool": "main_session_restart_recovery"}}
    transcript = [*s_msgs, *between, *(truth if truth_says else []), turn]
    recovery = SimpleNamespace(run_id="R", key="k", recovers="X")
    sim = SimpleNamespace(sessions={"k": SimpleNamespace(transcript=transcript)})
    return indistinct_link(sim, recovery, "S")


ANNOUNCE = {"role": "user", "provenance": {"kind": "inter_session", "sourceTool": "subagent_announce"}, "content": "."}


def test_a_link_is_indistinct_only_where_the_page_cannot_tell() -> None:
    assert _indistinct_cell([ANNOUNCE])  # seed 150995's page
    assert _indistinct_cell([ANNOUNCE, ANNOUNCE])
    assert not _indistinct_cell([])  # nothing hidden between: rule E names the source
    assert not _indistinct_cell([ANNOUNCE], truth_says=True)  # the recovered run showed something: owc can see it
    final = {"role": "assistant", "__openclaw": {"runId": "S"}, "stopReason": "stop", "content": "Done."}
    assert not _indistinct_cell([ANNOUNCE], last=final)  # S's transcript says it ended
    send = {"role": "user", "provenance": {"kind": "inter_session", "sourceTool": "sessions_send"}, "content": "."}
    assert not _indistinct_cell([send])  # a sessions_send's turn shows
    prompt = {"role": "user", "content": "[OpenClaw heartbeat poll]"}
    assert not _indistinct_cell([prompt])  # a heartbeat's prompt marks the next message (turnBoundary)
    # Seed 371031: S's silent final reply is hidden too, so the last message owc reads of S is its tool result.
    silent = {"role": "assistant", "__openclaw": {"runId": "S"}, "stopReason": "stop", "content": "NO_REPLY"}
    assert _indistinct_cell([silent, ANNOUNCE])
    assert not _indistinct_cell([silent])  # no completion hidden there: nothing looks steered into S
    other = {"role": "assistant", "__openclaw": {"runId": "Y"}, "stopReason": "stop", "content": "NO_REPLY"}
    assert not _indistinct_cell([other, ANNOUNCE])  # another run's reply: a run began after S
    said = {"role": "assistant", "__openclaw": {"runId": "S"}, "stopReason": "stop", "content": "All done."}
    assert not _indistinct_cell([said, ANNOUNCE])  # a final reply chat.history shows: S ended, owc can tell
