"""The chat store on a real SQLite file with Open WebUI's schema (and PostgreSQL where marked)."""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import sqlite3
import threading
import uuid
from pathlib import Path

import orjson
import pytest
import trio

from owc.render import output_text
from owc.render.seam import RECOVERED, SEAM_TEXTS
from owc.store import (
    Absorbed,
    AlreadyDone,
    AlreadyThere,
    ChatCorrupt,
    ChatMissing,
    ChatOwnerMismatch,
    ChatStore,
    Claimed,
    Locked,
    MessageMissing,
    NotAbsorbed,
    NotWritten,
    TakenOver,
    Written,
    make_engine,
    open_store,
    tree,
)

from store_race import USER, claim_all, plan

DEAD = lambda writer: False  # noqa: E731
ALIVE = lambda writer: True  # noqa: E731


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'webui.db'}"


@pytest.fixture
def store(sqlite_url: str) -> ChatStore:
    s = ChatStore(make_engine(sqlite_url, busy_timeout_ms=200))
    s.create_tables()
    yield s
    s.engine.dispose()


def user_turn_chat(chat_id: str, *, model: str = "openclaw.main") -> dict:
    return {
        "id": chat_id,
        "title": "T",
        "models": [model],
        "history": {
            "currentId": "u1",
            "messages": {
                "u1": {
                    "id": "u1",
                    "parentId": None,
                    "childrenIds": [],
                    "role": "user",
                    "content": "hi",
                    "models": [model],
                    "timestamp": 1,
                }
            },
        },
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }


def test_claim_on_an_empty_chat(store: ChatStore) -> None:
    store.create_chat("c", USER)
    result = store.claim("c", "m1", run_id="r1", writer="w", alive=DEAD, user_id=USER)
    assert isinstance(result, Claimed) and result.parent_id is None and result.current_id == "m1"
    chat = store.read_chat("c")
    message = chat["history"]["messages"]["m1"]
    assert (
        message["role"] == "assistant"
        and message["done"] is False
        and message["content"] == ""
        and message["output"] == []
    )
    assert message["meta"] == {"openclaw_run": "r1", "openclaw_writer": "w", "openclaw_open": True}
    assert chat["history"]["currentId"] == "m1"


def test_a_message_owc_owes_is_not_finished_by_open_webuis_own_done_save(store: ChatStore) -> None:
    """Issue 24, item 1: Open WebUI's cancel path saves M ``done: true`` with the cut output, keeping ``meta``; owc
    still owes M its finish (the mark stays), so a claim does not take M for finished and an ``unless_done`` finalize
    writes it. owc's own finished write removes the mark: after it, M is finished for everyone."""
    store.create_chat("c", USER)
    store.claim("c", "m1", run_id="r1", writer="w", alive=DEAD, user_id=USER)
    store.save_message("c", "m1", {"done": True, "content": "First part,", "output": []})
    saved = store.read_chat("c")["history"]["messages"]["m1"]
    assert saved["done"] is True and saved["meta"]["openclaw_open"] is True
    again = store.claim("c", "m1", run_id="r1", writer="w2", alive=DEAD, user_id=USER)
    assert isinstance(again, TakenOver)  # before the mark: AlreadyThere(done=True), and the rest was lost
    out = [{"type": "message", "content": [{"type": "output_text", "text": "First part, second."}]}]
    result = store.write("c", "m1", content="First part, second.", output=out, done=True, unless_done=True)
    assert isinstance(result, Written)
    final = store.read_chat("c")["history"]["messages"]["m1"]
    assert final["content"] == "First part, second." and "openclaw_open" not in final["meta"]
    assert isinstance(store.write("c", "m1", content="x", output=[], done=True, unless_done=True), AlreadyDone)
    late = store.claim("c", "m1", run_id="r1", writer="w3", alive=DEAD, user_id=USER)
    assert isinstance(late, AlreadyThere) and late.done


def test_what_a_process_showed_goes_in_front_of_a_finished_continuation_once(store: ChatStore) -> None:
    """Issue 24 campaign, class A: ``add_shown`` writes a finished M only, and only what M lacks of what was shown
    (``render.never_less.shown_in_front``), in front of the continuation's part; an open M (its writer shows what M
    held at its claim) and a second pass are left as they are."""

    def msg(text: str) -> dict:
        return {"type": "message", "content": [{"type": "output_text", "text": text}]}

    shown = {"S": [msg("Streamed before the crash.")]}
    store.create_chat("c", USER)
    store.claim("c", "m1", run_id="S", writer="w", alive=DEAD, user_id=USER)
    store.write("c", "m1", content="", output=[], done=False, meta={"openclaw_chain": ["S"], "openclaw_own_at": 0})
    assert store.add_shown("c", "m1", shown_through=shown, user_id=USER) is None, "M open: its writer's to write"
    meta = {"openclaw_chain": ["S", "R"], "openclaw_own_at": 0}
    store.write("c", "m1", content="Recovered.", output=[msg("Recovered.")], done=True, meta=meta, continues=True)
    added = store.add_shown("c", "m1", shown_through=shown, user_id=USER)
    assert isinstance(added, Written)
    final = store.read_chat("c")["history"]["messages"]["m1"]
    # The seam (issue 25 item 3) between the part put in front and the continuation's, which had none.
    assert final["content"] == f"Streamed before the crash.\n{SEAM_TEXTS[RECOVERED]}\nRecovered." and final["done"]
    assert final["meta"]["openclaw_own_at"] == 1 and final["meta"]["openclaw_chain"] == ["S", "R"]
    assert store.add_shown("c", "m1", shown_through=shown, user_id=USER) is None, "a second pass adds nothing"
    assert store.read_chat("c")["history"]["messages"]["m1"] == final


def test_a_continuations_finish_leaves_a_finish_of_another_copy_of_it(store: ChatStore) -> None:
    """Fuzz seed 40164 under load: two deploys linked the same recovery R into M; one's copy took M over (from M's
    finish with the cut run alone) and read M's output then; the other's finished M first, with the cut run's streamed
    tail. The first's finish (``unless_holds=R``) then finds M finished holding R and leaves it (before, it replaced
    it with less). A finished M that does not hold R (the claim took it back for R) is written."""

    def msg(text: str) -> dict:
        return {"type": "message", "content": [{"type": "output_text", "text": text}]}

    store.create_chat("c", USER)
    store.claim("c", "m1", run_id="S", writer="w", alive=DEAD, user_id=USER)
    store.write("c", "m1", content="Cut.", output=[msg("Cut.")], done=True, meta={"openclaw_chain": ["S"]})
    meta = {"openclaw_chain": ["S", "R"], "openclaw_own_at": 1}
    out = [msg("Cut. And the streamed tail."), msg("Recovered.")]
    first = store.write("c", "m1", content="x", output=out, done=True, meta=meta, unless_holds="R")
    assert isinstance(first, Written), "M held only S: the recovery's finish is written"
    late = store.write("c", "m1", content="y", output=[msg("Cut."), msg("Recovered.")], done=True, unless_holds="R")
    assert isinstance(late, AlreadyDone)
    assert store.read_chat("c")["history"]["messages"]["m1"]["output"] == out


def test_a_continuations_finish_keeps_what_m_gained_after_its_claim(store: ChatStore) -> None:
    """Fuzz seed 40164 under load (class A's last shape): deploy Y finished M as the cut run S's own message from its
    transcript (the tool call alone), and Y's copy of the recovery R claimed M and read that as its prefix; then X,
    whose tabs showed S's text after the call, put it into M (``add_shown``); then R finished M from its claim's read.
    A continuation's finish over an M finished with exactly the runs before it keeps what M gained in front of its
    own part (``render.never_less.gained_since_claim``); over an M that holds other runs it is written as before."""

    def msg(text: str) -> dict:
        return {"type": "message", "content": [{"type": "output_text", "text": text}]}

    call = {"type": "function_call", "call_id": "c1", "name": "exec", "arguments": "{}"}
    result = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    store.create_chat("c", USER)
    store.claim("c", "m1", run_id="S", writer="w", alive=DEAD, user_id=USER)
    store.write("c", "m1", content="", output=[call, result, msg("Two lines.")], done=True)  # S's, with X's tail
    meta = {"openclaw_chain": ["S", "R"], "openclaw_own_at": 2}
    written = store.write(
        "c", "m1", content="Recovered.", output=[call, result, msg("Recovered.")], done=True, meta=meta, continues=True
    )
    assert isinstance(written, Written)
    final = store.read_chat("c")["history"]["messages"]["m1"]
    assert final["content"] == "Two lines.\nRecovered." and final["meta"]["openclaw_own_at"] == 3
    assert written.message["content"] == final["content"], "the tabs get M as written"
    # M now holds R: a later finish of R (a retry from the same claim) is written as it is.
    again = store.write(
        "c", "m1", content="Recovered.", output=[call, result, msg("Recovered.")], done=True, meta=meta, continues=True
    )
    assert isinstance(again, Written)
    assert store.read_chat("c")["history"]["messages"]["m1"]["content"] == "Recovered."


def test_a_done_message_without_the_mark_stays_finished(store: ChatStore) -> None:
    """A message finished before the mark existed (or Open WebUI's own) is finished when it says ``done``."""
    store.create_chat("c", USER)
    store.claim("c", "m1", run_id="r1", writer="w", alive=DEAD, user_id=USER)
    store.write("c", "m1", content="all", output=[], done=True)
    store.save_message("c", "m1", {"meta": {"openclaw_run": "r1", "openclaw_writer": "w"}})
    result = store.claim("c", "m1", run_id="r1", writer="w2", alive=DEAD, user_id=USER)
    assert isinstance(result, AlreadyThere) and result.done


def test_claim_under_a_user_turn_inherits_its_model(store: ChatStore, sqlite_url: str) -> None:
    store.create_chat("c", USER, chat=user_turn_chat("c"))
    result = store.claim("c", "m1", run_id="r1", writer="w", alive=DEAD, user_id=USER, task_id="t-1")
    assert isinstance(result, Claimed) and result.parent_id == "u1" and result.parent_children == ("m1",)
    chat = store.read_chat("c")
    assert chat["history"]["messages"]["m1"]["model"] == "openclaw.main"
    assert chat["history"]["messages"]["m1"]["meta"]["task_id"] == "t-1"
    assert chat["history"]["messages"]["u1"]["childrenIds"] == ["m1"]
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    assert db.execute("select current_message_id from chat").fetchone() == ("m1",)
    row = db.execute(
        "select id, role, parent_id, content, output, done, model_id, user_id from chat_message where id = 'c-m1'"
    ).fetchone()
    assert row == ("c-m1", "assistant", "u1", '""', "[]", 0, "openclaw.main", USER)


def test_claim_anchors_on_the_deepest_leaf_of_the_current_branch(store: ChatStore) -> None:
    # u1 -> a1 -> u2 -> (a2 | a2b)   currentId points at u2's branch through a2 (an old variant a2b is newer)
    messages = {
        "u1": {"id": "u1", "parentId": None, "childrenIds": ["a1"], "role": "user"},
        "a1": {"id": "a1", "parentId": "u1", "childrenIds": ["u2"], "role": "assistant", "model": "m"},
        "u2": {"id": "u2", "parentId": "a1", "childrenIds": ["a2", "a2b"], "role": "user"},
        "a2": {"id": "a2", "parentId": "u2", "childrenIds": ["u3"], "role": "assistant", "model": "m"},
        "u3": {"id": "u3", "parentId": "a2", "childrenIds": [], "role": "user"},
        "a2b": {"id": "a2b", "parentId": "u2", "childrenIds": [], "role": "assistant", "model": "m"},
        "x": {"id": "x", "parentId": None, "childrenIds": [], "role": "user"},  # another root branch
    }
    store.create_chat("c", USER, chat={"history": {"messages": messages, "currentId": "a2"}})
    result = store.claim("c", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    assert result.parent_id == "u3"  # below the view's leaf, never beside a2 or on the sibling a2b / x


def test_a_run_found_late_goes_above_the_tails_messages_of_later_runs(store: ChatStore, sqlite_url: str) -> None:
    """A run that ended while ``chat.history`` failed is found after later runs of its session claimed: its claim
    lands at the tail, and its finalize (the transcript in hand) puts it above theirs (run-start order: issue 11,
    ``order-unreadable``), in the tree and in the ``chat_message`` mirror, and the view stays on the tail. Never
    above a user turn, nor above a run the transcript does not name."""
    store.create_chat("c", USER, chat=user_turn_chat("c"))
    for message, run in (("mb", "rb"), ("mc", "rc")):
        store.claim("c", message, run_id=run, writer="w", alive=DEAD, user_id=USER)
    claimed = store.claim("c", "ma", run_id="ra", writer="w", alive=DEAD, user_id=USER)
    assert isinstance(claimed, Claimed) and claimed.parent_id == "mc"  # at the tail, until its finalize
    result = store.write("c", "ma", content="A", output=[], done=True, run_order=("ra", "rb", "rc"))
    assert isinstance(result, Written) and {m["id"] for m in result.moved} == {"u1", "mb", "mc"}
    chat = store.read_chat("c")
    messages = chat["history"]["messages"]
    assert messages["ma"]["parentId"] == "u1" and messages["ma"]["childrenIds"] == ["mb"]
    assert messages["mb"]["parentId"] == "ma" and messages["mc"]["parentId"] == "mb"
    assert messages["u1"]["childrenIds"] == ["ma"] and chat["history"]["currentId"] == "mc"
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    parents = dict(db.execute("select id, parent_id from chat_message where chat_id = 'c'").fetchall())
    assert parents == {"c-u1": None, "c-ma": "u1", "c-mb": "ma", "c-mc": "mb"}
    assert db.execute("select current_message_id from chat").fetchone() == ("mc",)
    # Only runs the transcript names are reordered: "md" (a run it does not name) stays above the new message.
    store.claim("c", "md", run_id="rd", writer="w", alive=DEAD, user_id=USER)
    store.claim("c", "me", run_id="re", writer="w", alive=DEAD, user_id=USER)
    placed = store.write("c", "me", content="E", output=[], done=True, run_order=("re", "rb"))
    assert placed.moved == () and store.read_chat("c")["history"]["messages"]["me"]["parentId"] == "md"
    # A user turn ends the line: nothing goes above what the user wrote.
    store.create_chat("d", USER, chat=user_turn_chat("d"))
    store.claim("d", "mx", run_id="rx", writer="w", alive=DEAD, user_id=USER)
    placed = store.write("d", "mx", content="X", output=[], done=True, run_order=("rx", "ry"))
    assert placed.moved == () and store.read_chat("d")["history"]["messages"]["mx"]["parentId"] == "u1"


def test_a_finalize_moves_a_live_claimed_run_above_later_runs_of_its_session(store: ChatStore, sqlite_url: str) -> None:
    """A run claimed live (no transcript yet) landed below later runs of its session that another process had
    given their messages first; its finalize, with the transcript's order of the session's runs, puts the line
    in run order, also the later runs below it (issue 11: fuzzer seeds 432, 1830)."""
    store.create_chat("c", USER, chat=user_turn_chat("c"))
    for message, run in (("mb", "rb"), ("mc", "rc"), ("ma", "ra"), ("md", "rd")):
        store.claim("c", message, run_id=run, writer="w", alive=DEAD, user_id=USER)
    # u1 -> mb -> mc -> ma -> md; the runs began ra, rb, rc, rd.
    result = store.write("c", "ma", content="A", output=[], done=True, run_order=("ra", "rb", "rc", "rd"))
    assert isinstance(result, Written) and {m["id"] for m in result.moved} == {"u1", "mb", "mc", "md"}
    messages = store.read_chat("c")["history"]["messages"]
    assert messages["ma"]["parentId"] == "u1" and messages["ma"]["childrenIds"] == ["mb"]
    assert messages["mb"]["parentId"] == "ma" and messages["mc"]["parentId"] == "mb"
    assert messages["md"]["parentId"] == "mc" and messages["mc"]["childrenIds"] == ["md"]
    assert messages["u1"]["childrenIds"] == ["ma"]
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    parents = dict(db.execute("select id, parent_id from chat_message where chat_id = 'c'").fetchall())
    assert parents == {"c-u1": None, "c-ma": "u1", "c-mb": "ma", "c-mc": "mb", "c-md": "mc"}
    # In order already: nothing moves.
    again = store.write("c", "md", content="D", output=[], done=True, run_order=("ra", "rb", "rc", "rd"))
    assert again.moved == () and store.read_chat("c")["history"]["messages"]["md"]["parentId"] == "mc"


def test_a_message_finished_without_its_transcript_is_put_in_order_later_and_nothing_else_changes(
    store: ChatStore, sqlite_url: str
) -> None:
    """Fuzz seed 150032: while ``chat.history`` failed, one process claimed the later run rb, another the earlier ra
    below it, and both finalized from their streams, without the order only the transcript knows. The finalize's
    ``Written.parent_run`` says ra's message hangs under another run's (so it may be out of order); once the
    transcript answers, ``put_in_order`` puts the line right, changing no content, and moves the view with it."""
    store.create_chat("c", USER, chat=user_turn_chat("c"))
    store.claim("c", "mb", run_id="rb", writer="w", alive=DEAD, user_id=USER)
    first = store.write("c", "mb", content="B", output=[], done=True)
    assert isinstance(first, Written) and first.parent_run is None  # under the user turn: nothing to put right
    store.claim("c", "ma", run_id="ra", writer="w", alive=DEAD, user_id=USER)
    second = store.write("c", "ma", content="A", output=[], done=True)
    assert isinstance(second, Written) and second.parent_run == "rb" and second.moved == ()
    before = store.read_chat("c")["history"]["messages"]
    moved = store.put_in_order("c", "ma", run_order=("ra", "rb"), user_id=USER)
    assert isinstance(moved, Written) and {m["id"] for m in moved.moved} == {"u1", "ma", "mb"}
    assert moved.current_id == "mb"  # the view was on ma, the tail: it stays on the tail
    chat = store.read_chat("c")
    messages = chat["history"]["messages"]
    assert messages["u1"]["childrenIds"] == ["ma"] and messages["ma"]["parentId"] == "u1"
    assert messages["ma"]["childrenIds"] == ["mb"] and messages["mb"]["parentId"] == "ma"
    assert messages["mb"]["childrenIds"] == [] and chat["history"]["currentId"] == "mb"
    for mid in ("ma", "mb"):  # only the links moved
        assert {k: v for k, v in messages[mid].items() if k not in ("parentId", "childrenIds")} == {
            k: v for k, v in before[mid].items() if k not in ("parentId", "childrenIds")
        }
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    parents = dict(db.execute("select id, parent_id from chat_message where chat_id = 'c'").fetchall())
    assert parents == {"c-u1": None, "c-ma": "u1", "c-mb": "ma"}
    assert db.execute("select current_message_id from chat").fetchone() == ("mb",)
    # In order already, or a message that is gone: nothing is written.
    assert store.put_in_order("c", "mb", run_order=("ra", "rb")) is None
    assert store.put_in_order("c", "gone", run_order=("ra", "rb")) is None


def _a_short_finish_is_marked_until_corrected(store: ChatStore, chat_id: str) -> None:
    """Fuzz seed 212956: a process finished M from a stream with gaps (``chat.history`` failed) and was killed before
    its correction ran; the next process must learn that M is short. The finishing write's ``CORRECT_MARK`` stays in
    M (chat JSON and ``chat_message``), ``chat_facts`` names M, and any later finishing write without the mark (the
    correction from the transcript, another process's finalize) removes it; ``drop_correct_mark`` removes it too."""
    from owc.rules.finished import CORRECT_MARK

    store.create_chat(chat_id, USER, chat=user_turn_chat(chat_id))
    for mid, run in (("ma", "ra"), ("mb", "rb")):
        store.claim(chat_id, mid, run_id=run, writer="w", alive=DEAD, user_id=USER)
        store.write(chat_id, mid, content="short", output=[], done=True, meta={CORRECT_MARK: True})
    assert store.chat_facts([chat_id])[chat_id].uncorrected == {"ma", "mb"}
    store.write(chat_id, "ma", content="whole", output=[], done=True, fills=True)
    assert CORRECT_MARK not in store.read_chat(chat_id)["history"]["messages"]["ma"]["meta"]
    assert store.chat_facts([chat_id])[chat_id].uncorrected == {"mb"}
    assert store.drop_correct_mark(chat_id, "mb") and not store.drop_correct_mark(chat_id, "mb")
    mb = store.read_chat(chat_id)["history"]["messages"]["mb"]
    assert mb["content"] == "short" and mb["meta"] == {"openclaw_run": "rb", "openclaw_writer": "w"}
    assert store.chat_facts([chat_id])[chat_id].uncorrected == frozenset()


def test_a_short_finish_is_marked_until_corrected(store: ChatStore) -> None:
    _a_short_finish_is_marked_until_corrected(store, "c")


@pytest.mark.postgres
def test_a_short_finish_is_marked_until_corrected_postgres(postgres_url: str) -> None:
    store = ChatStore(make_engine(postgres_url))
    store.create_tables()
    _a_short_finish_is_marked_until_corrected(store, f"pg-mark-{uuid.uuid4()}")
    store.engine.dispose()


def test_a_finalize_of_the_tail_run_keeps_the_view_on_the_tail(store: ChatStore) -> None:
    store.create_chat("c", USER, chat=user_turn_chat("c"))
    for message, run in (("mb", "rb"), ("ma", "ra")):
        store.claim("c", message, run_id=run, writer="w", alive=DEAD, user_id=USER)
    store.write("c", "ma", content="A", output=[], done=True, run_order=("ra", "rb"))
    chat = store.read_chat("c")
    assert chat["history"]["currentId"] == "mb" and chat["history"]["messages"]["mb"]["parentId"] == "ma"


def test_claiming_twice_backs_off_and_dead_writer_is_taken_over(store: ChatStore) -> None:
    store.create_chat("c", USER)
    store.claim("c", "m", run_id="r", writer="w1", alive=DEAD, user_id=USER)
    again = store.claim("c", "m", run_id="r", writer="w2", alive=ALIVE, user_id=USER)
    assert again == AlreadyThere(writer="w1", run_id="r", done=False)
    taken = store.claim("c", "m", run_id="r", writer="w2", alive=lambda w: w == "w2", user_id=USER)
    assert isinstance(taken, TakenOver) and taken.previous_writer == "w1"
    assert store.read_chat("c")["history"]["messages"]["m"]["meta"]["openclaw_writer"] == "w2"
    assert len(store.read_chat("c")["history"]["messages"]) == 1
    store.write("c", "m", content="done", output=[], done=True)
    finished = store.claim("c", "m", run_id="r", writer="w3", alive=DEAD, user_id=USER)
    assert finished == AlreadyThere(writer="w2", run_id="r", done=True)  # a finished message is never taken


def test_a_message_let_go_at_shutdown_is_taken_at_once_by_the_next_process(store: ChatStore) -> None:
    """Issue 25, item 1: a process closing for good lets go of the unfinished messages its writers held
    (``release``); the next process's writer takes the writerless message at once, with nobody to wait for. Only
    this process's own, unfinished messages are let go: another process's stays its."""
    store.create_chat("c", USER)
    store.claim("c", "m", run_id="r", writer="p1/conn", alive=DEAD, user_id=USER)
    store.claim("c", "m2", run_id="r2", writer="p2/conn", alive=DEAD, user_id=USER)
    ours = lambda writer: str(writer).startswith("p1/")  # noqa: E731
    # Before: a writer of another process may be alive, so the next process stands by.
    assert store.claim("c", "m", run_id="r", writer="p3/conn", alive=ALIVE, user_id=USER) == AlreadyThere(
        writer="p1/conn", run_id="r", done=False
    )
    assert store.release("c", "m", holds=ours) is True
    assert store.release("c", "m2", holds=ours) is False  # p2's: not ours to let go
    assert store.release("c", "gone", holds=ours) is False
    meta = store.read_chat("c")["history"]["messages"]["m"]["meta"]
    assert "openclaw_writer" not in meta and meta["openclaw_open"] is True  # still owed its finish
    taken = store.claim("c", "m", run_id="r", writer="p3/conn", alive=ALIVE, user_id=USER, adopt_writerless=True)
    assert isinstance(taken, TakenOver) and taken.previous_writer is None
    store.write("c", "m", content="done", output=[], done=True)
    assert store.release("c", "m", holds=lambda w: True) is False  # finished: nothing to let go


def test_a_message_without_an_owc_writer_is_not_taken(store: ChatStore) -> None:
    chat = user_turn_chat("c")
    chat["history"]["messages"]["m"] = {
        "id": "m",
        "parentId": "u1",
        "childrenIds": [],
        "role": "assistant",
        "content": "",
        "done": False,
    }
    store.create_chat("c", USER, chat=chat)
    assert store.claim("c", "m", run_id="r", writer="w", alive=DEAD, user_id=USER) == AlreadyThere(
        writer=None, run_id=None, done=False
    )


def test_handover_and_finalize(store: ChatStore, sqlite_url: str) -> None:
    store.create_chat("c", USER, chat=user_turn_chat("c"))
    store.claim("c", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    items = [
        {
            "type": "message",
            "id": "msg_1",
            "status": "in_progress",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hal"}],
        }
    ]
    half = store.write("c", "m", content="Hal", output=items, done=False)
    assert isinstance(half, Written) and half.message["done"] is False
    final = store.write("c", "m", content="Half\x00 done", output=items, done=True, error="model overloaded")
    assert final.message["content"] == "Half done" and final.message["error"] == {"content": "model overloaded"}
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    content, done, error = db.execute("select content, done, error from chat_message where id = 'c-m'").fetchone()
    assert (orjson.loads(content), done, orjson.loads(error)) == ("Half done", 1, {"content": "model overloaded"})
    with pytest.raises(MessageMissing):
        store.write("c", "nope", content="", output=[], done=True)


def test_bad_input_is_a_typed_error_and_writes_nothing(store: ChatStore, sqlite_url: str) -> None:
    store.create_chat("good", USER)
    store.create_chat("theirs", "someone-else")
    store.create_chat("broken", USER)
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    db.execute("update chat set chat = '{not json' where id = 'broken'")
    db.commit()
    store.create_chat("wrong-shape", USER, chat={"history": {"messages": ["not", "a", "map"]}})
    store.create_chat("bad-entry", USER, chat={"history": {"messages": {"m": "not a message"}, "currentId": "m"}})
    with pytest.raises(ChatCorrupt, match="message m is not an object"):
        store.claim("bad-entry", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    with pytest.raises(ChatCorrupt, match="message m is not an object"):
        store.write("bad-entry", "m", content="x", output=[], done=True)
    with pytest.raises(ChatMissing):
        store.claim("missing", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    with pytest.raises(ChatOwnerMismatch):
        store.claim("theirs", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    with pytest.raises(ChatCorrupt, match="not JSON"):
        store.claim("broken", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    with pytest.raises(ChatCorrupt, match="not an object"):
        store.claim("wrong-shape", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    assert db.execute("select count(*) from chat_message").fetchone() == (0,)
    assert store.read_chat("theirs")["history"]["messages"] == {}
    # Other chats are unaffected, and the store still works.
    assert isinstance(store.claim("good", "m", run_id="r", writer="w", alive=DEAD, user_id=USER), Claimed)


def test_two_runs_claimed_concurrently_chain(store: ChatStore) -> None:
    store.create_chat("c", USER, chat=user_turn_chat("c"))
    barrier = threading.Barrier(2)

    def claim(message_id: str) -> Claimed:
        barrier.wait()
        return store.claim(
            "c", message_id, run_id=f"run-{message_id}", writer=f"w-{message_id}", alive=DEAD, user_id=USER
        )

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        _first, _second = pool.map(claim, ["m1", "m2"])
    messages = store.read_chat("c")["history"]["messages"]
    parents = sorted([messages["m1"]["parentId"], messages["m2"]["parentId"]])
    assert "u1" in parents and ("m1" in parents or "m2" in parents)  # one under the user turn, the other under it
    assert messages["u1"]["childrenIds"] in (["m1"], ["m2"])


def _check_one_message_per_run(store: ChatStore, chats: int, runs_per_chat: int, tag: str) -> None:
    by_chat: dict[str, list[str]] = {}
    for chat_id, _key, _run, message_id in plan(chats, runs_per_chat, tag):
        by_chat.setdefault(chat_id, []).append(message_id)
    with store.engine.connect() as conn:
        rows = dict(conn.exec_driver_sql("select chat_id, count(*) from chat_message group by chat_id").fetchall())
    assert {c: rows.get(c) for c in by_chat} == {c: runs_per_chat for c in by_chat}
    for chat_id, message_ids in by_chat.items():
        messages = store.read_chat(chat_id)["history"]["messages"]
        assert sorted(messages) == sorted(message_ids)
        # One linear chain: one root, every message at most one child, the children lists agree.
        assert [m for m in messages.values() if m["parentId"] is None].__len__() == 1
        assert all(len(m["childrenIds"]) <= 1 for m in messages.values())
        assert all(messages[m["parentId"]]["childrenIds"] == [mid] for mid, m in messages.items() if m["parentId"])


def _race(url: str, writers: int, chats: int, runs_per_chat: int, *, processes: bool) -> list[dict[str, int]]:
    tag = f"{'p' if processes else 't'}-{uuid.uuid4()}"
    setup = ChatStore(make_engine(url))
    setup.create_tables()
    for chat_id in sorted({p[0] for p in plan(chats, runs_per_chat, tag)}):
        setup.create_chat(chat_id, USER)
    args = [(url, f"writer-{i}", chats, runs_per_chat, i, tag) for i in range(writers)]
    if processes:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(writers, mp_context=ctx) as pool:
            results = list(pool.map(_claim_star, args))
    else:
        with concurrent.futures.ThreadPoolExecutor(writers) as pool:
            results = list(pool.map(_claim_star, args))
    _check_one_message_per_run(setup, chats, runs_per_chat, tag)
    setup.engine.dispose()
    assert sum(r["claimed"] for r in results) == chats * runs_per_chat  # exactly one claimer per run
    assert all(r["claimed"] + r["already"] == r["runs"] for r in results)
    return results


def _claim_star(args: tuple) -> dict[str, int]:
    return claim_all(*args)


def test_two_connections_one_message_sqlite_threads(sqlite_url: str) -> None:
    _race(sqlite_url, writers=8, chats=4, runs_per_chat=50, processes=False)


def test_two_connections_one_message_sqlite_processes(sqlite_url: str) -> None:
    _race(sqlite_url, writers=8, chats=4, runs_per_chat=50, processes=True)


@pytest.mark.postgres
def test_two_connections_one_message_postgres_threads(postgres_url: str) -> None:
    _race(postgres_url, writers=8, chats=4, runs_per_chat=50, processes=False)


@pytest.mark.postgres
def test_two_connections_one_message_postgres_processes(postgres_url: str) -> None:
    _race(postgres_url, writers=8, chats=4, runs_per_chat=50, processes=True)


def test_locked_database(tmp_path: Path, caplog) -> None:
    path = tmp_path / "locked.db"
    store = ChatStore(make_engine(f"sqlite:///{path}", busy_timeout_ms=50))
    store.create_tables()
    store.create_chat("c", USER)
    store.create_chat("other", USER)
    store.claim("c", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer (Open WebUI) holds the write lock
    holder.execute("update chat set title = 'held' where id = 'other'")
    try:
        assert isinstance(store.claim("c", "m2", run_id="r2", writer="w", alive=DEAD, user_id=USER), Locked)
        with caplog.at_level(logging.WARNING, logger="owc.store"):
            result = store.write("c", "m", content="final", output=[], done=True)
        assert isinstance(result, NotWritten) and result.attempts == 6 and "locked" in result.detail
        tries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("store.write_locked")]
        assert [t.rsplit("attempt=", 1)[1] for t in tries] == [f"{i}/6" for i in range(1, 7)]  # six real tries
    finally:
        holder.execute("COMMIT")  # the other writer's transaction was not harmed
        holder.close()
    db = sqlite3.connect(path)
    assert db.execute("select title from chat where id = 'other'").fetchone() == ("held",)
    assert store.read_chat("c")["history"]["messages"]["m"]["done"] is False
    # Once the lock is gone the same calls succeed.
    assert isinstance(store.write("c", "m", content="final", output=[], done=True), Written)
    assert isinstance(store.claim("c", "m2", run_id="r2", writer="w", alive=DEAD, user_id=USER), Claimed)


def test_finalize_succeeds_when_the_lock_is_released_between_attempts(tmp_path: Path) -> None:
    path = tmp_path / "brief.db"
    store = ChatStore(make_engine(f"sqlite:///{path}", busy_timeout_ms=100))
    store.create_tables()
    store.create_chat("c", USER)
    store.claim("c", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    attempts_seen = threading.Event()

    def release_after_first_attempt() -> None:
        attempts_seen.wait(10)
        holder.execute("COMMIT")

    import logging

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("store.write_locked"):
                attempts_seen.set()

    watch = Watch()
    logging.getLogger("owc.store").addHandler(watch)
    releaser = threading.Thread(target=release_after_first_attempt)
    releaser.start()
    try:
        result = store.write("c", "m", content="final", output=[], done=True)
    finally:
        releaser.join()
        logging.getLogger("owc.store").removeHandler(watch)
        holder.close()
    assert isinstance(result, Written) and 2 <= result.attempts <= 6


async def test_trio_store_runs_in_threads(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 't.db'}", create=True) as store:
        await store.create_chat("c", USER)
        results = []

        async def claim(i: int) -> None:
            results.append(await store.claim("c", f"m{i}", run_id=f"r{i}", writer="w", alive=DEAD, user_id=USER))

        async with trio.open_nursery() as nursery:
            for i in range(6):
                nursery.start_soon(claim, i)
        assert all(isinstance(r, Claimed) for r in results)
        chat = await store.read_chat("c")
        assert all(len(m["childrenIds"]) <= 1 for m in chat["history"]["messages"].values())


def test_deepest_leaf_survives_cycles_and_dangling_ids() -> None:
    messages = {
        "a": {"id": "a", "parentId": None, "childrenIds": ["b", "ghost"], "role": "user"},
        "b": {"id": "b", "parentId": "a", "childrenIds": ["a"], "role": "assistant"},  # a cycle back to a
    }
    assert tree.deepest_leaf(messages, "a") == "b"
    chat = {"history": {"messages": messages, "currentId": "missing"}}
    assert tree.anchor(chat) in ("a", "b")
    assert tree.anchor({"history": {"messages": {}, "currentId": None}}) is None


def test_without_a_current_id_the_newest_message_stands_for_the_view() -> None:
    def msg(mid: str, ts: object) -> dict[str, object]:
        return {"id": mid, "parentId": None, "childrenIds": [], "role": "user", "timestamp": ts}

    messages = {
        "old": msg("old", 5),
        "tie-1": msg("tie-1", 9),
        "tie-2": msg("tie-2", 9),
        "odd": msg("odd", "yesterday"),
    }
    assert tree.anchor({"history": {"messages": messages, "currentId": None}}) == "tie-2"  # newest, then last inserted
    # A large chat without a usable currentId is one pass (this runs under the row lock).
    big = {f"m{i}": msg(f"m{i}", i // 3) for i in range(20_000)}
    assert tree.anchor({"history": {"messages": big, "currentId": "gone"}}) == "m19999"


@pytest.mark.postgres
def test_postgres_row_lock_held_elsewhere_is_reported_locked(postgres_url: str) -> None:
    store = ChatStore(make_engine(postgres_url, busy_timeout_ms=100))
    store.create_tables()
    chat_id = f"pg-lock-{uuid.uuid4()}"
    store.create_chat(chat_id, USER)
    store.claim(chat_id, "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    other = make_engine(postgres_url)
    with other.connect() as holder:
        holder.exec_driver_sql("SELECT id FROM chat WHERE id = %(id)s FOR UPDATE", {"id": chat_id})  # Open WebUI's lock
        assert isinstance(store.claim(chat_id, "m2", run_id="r2", writer="w", alive=DEAD, user_id=USER), Locked)
        result = store.write(chat_id, "m", content="final", output=[], done=True)
        assert isinstance(result, NotWritten) and result.attempts == 6
        holder.rollback()
    assert isinstance(store.write(chat_id, "m", content="final", output=[], done=True), Written)
    other.dispose()
    store.engine.dispose()


def test_sqlite_engine_uses_open_webui_pragmas(tmp_path: Path) -> None:
    """WAL and Open WebUI's 5 s busy wait: owc's writers wait for Open WebUI's exactly as long as its own
    wait for each other."""
    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
        # Issue 32: Open WebUI's page cache, temp store, memory map and journal limit too (its defaults).
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -65536
        assert conn.exec_driver_sql("PRAGMA temp_store").scalar() == 2  # MEMORY
        assert conn.exec_driver_sql("PRAGMA mmap_size").scalar() == 268435456
        assert conn.exec_driver_sql("PRAGMA journal_size_limit").scalar() == 67108864
    engine.dispose()


def test_the_sqlite_pragmas_follow_open_webuis_variables() -> None:
    from owc.store.engine import open_webui_sqlite_pragmas

    assert open_webui_sqlite_pragmas({}) == [
        "PRAGMA cache_size=-65536",
        "PRAGMA temp_store=MEMORY",
        "PRAGMA mmap_size=268435456",
        "PRAGMA journal_size_limit=67108864",
    ]
    env = {"DATABASE_SQLITE_PRAGMA_MMAP_SIZE": "", "DATABASE_SQLITE_PRAGMA_CACHE_SIZE": "-2000"}
    assert open_webui_sqlite_pragmas(env)[:2] == ["PRAGMA cache_size=-2000", "PRAGMA temp_store=MEMORY"]
    assert not [p for p in open_webui_sqlite_pragmas(env) if "mmap" in p]  # empty: skipped, as Open WebUI does
    hostile = {"DATABASE_SQLITE_PRAGMA_TEMP_STORE": "MEMORY; DROP TABLE chat"}
    assert not [p for p in open_webui_sqlite_pragmas(hostile) if "temp_store" in p]


def test_a_write_touches_updated_at(store: ChatStore, sqlite_url: str) -> None:
    store.create_chat("c", USER)
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    db.execute("update chat set updated_at = 1 where id = 'c'")
    db.commit()
    store.claim("c", "m", run_id="r", writer="w", alive=DEAD, user_id=USER)
    claimed_at = db.execute("select updated_at from chat where id = 'c'").fetchone()[0]
    db.execute("update chat set updated_at = 1 where id = 'c'")
    db.commit()
    store.write("c", "m", content="done", output=[], done=True)
    written_at = db.execute("select updated_at from chat where id = 'c'").fetchone()[0]
    assert claimed_at > 1_700_000_000 and written_at > 1_700_000_000  # epoch seconds, as Open WebUI keeps them
    db.close()


def test_a_second_finalize_of_the_same_finished_message_writes_nothing(store: ChatStore, monkeypatch) -> None:
    """Issue 24, item 13: two processes finish one run from the same transcript (8 processes on PostgreSQL wrote 235
    of 500 runs twice). The second finalize finds M finished with exactly what it would write: it writes nothing
    (no chat save, no mirror row), and still answers ``Written`` so its tabs get the finished message."""
    store.create_chat("c", USER)
    store.claim("c", "m1", run_id="r1", writer="w", alive=DEAD, user_id=USER)
    out = [{"type": "message", "content": [{"type": "output_text", "text": "All of it."}]}]
    assert isinstance(store.write("c", "m1", content="All of it.", output=out, done=True), Written)
    saves: list[str] = []
    real_save = store._save
    monkeypatch.setattr(
        store, "_save", lambda conn, chat_id, *a, **k: (saves.append(chat_id), real_save(conn, chat_id, *a, **k))
    )
    again = store.write("c", "m1", content="All of it.", output=out, done=True)
    assert isinstance(again, Written) and again.message["content"] == "All of it." and saves == []
    changed = store.write("c", "m1", content="More of it.", output=out, done=True)
    assert isinstance(changed, Written) and saves == ["c"]  # a different content is written


def _two_replies_chat(chat_id: str, *, recovery_meta: dict | None = None, m_chain: list | None = None) -> dict:
    """Issue 24 item 4's shape D as the chat holds it: the recovery R's message X (of its own, finished, made first
    by the process back first), then the cut run S's message M under it (the other process claimed it later and
    wrote it open with what S had streamed)."""
    own = {"openclaw_run": "R", "openclaw_writer": "w1"}
    meta_m = {"openclaw_run": "S", "openclaw_writer": "w2", "openclaw_open": True, "openclaw_chain": m_chain or ["S"]}
    return {
        "id": chat_id,
        "history": {
            "currentId": "M",
            "messages": {
                "u": {"id": "u", "parentId": None, "childrenIds": ["X"], "role": "user", "content": "hi"},
                "X": {
                    "id": "X", "parentId": "u", "childrenIds": ["M"], "role": "assistant", "done": True,
                    "content": "Recovered.", "output": [{"type": "message", "text": "Recovered."}],
                    "meta": recovery_meta if recovery_meta is not None else own,
                },
                "M": {
                    "id": "M", "parentId": "X", "childrenIds": [], "role": "assistant", "done": False,
                    "content": "Two lines:", "output": [{"type": "message", "text": "Two lines:"}], "meta": meta_m,
                },
            },
        },
    }  # fmt: skip


def _store_on(db_url: str | None, sqlite_url: str) -> ChatStore:
    s = ChatStore(make_engine(db_url or sqlite_url, busy_timeout_ms=200))
    s.create_tables()
    return s


def test_a_recoverys_own_message_is_made_one_reply_with_its_cut_runs_message(
    db_url: str | None, sqlite_url: str
) -> None:
    """Issue 24 item 4's shape D (fuzz repro ``recovery-unlinked``): two deploys, a crash under S, which had stored
    nothing. The deploy back first gave the boot's recovery R a message of its own (X: it could not name S, and S's
    message did not exist yet); the other deploy, which had streamed S, holds S's message M. ``absorb_recovery`` makes
    one reply of them in one locked write: M shows S's part then R's, chain ``[S, R]``, finished; X is gone from the
    tree (M hangs where X did, the view on M) and from ``chat_message``. On SQLite and PostgreSQL."""
    from sqlalchemy import text

    store = _store_on(db_url, sqlite_url)
    chat_id = f"absorb-{uuid.uuid4()}"
    try:
        store.create_chat(chat_id, USER, chat=_two_replies_chat(chat_id))
        result = store.absorb_recovery(chat_id, "M", source="S", recovery="R", recovery_message_id="X", user_id=USER)
        assert isinstance(result, Absorbed) and result.removed == "X" and result.current_id == "M"
        messages = store.read_chat(chat_id)["history"]["messages"]
        assert set(messages) == {"u", "M"}
        m = messages["M"]
        # M's part, the seam (issue 25 item 3), the recovery's part.
        texts = [item.get("text") or output_text([item]) for item in m["output"]]
        assert texts == ["Two lines:", SEAM_TEXTS[RECOVERED], "Recovered."]
        assert m["done"] is True and m["parentId"] == "u" and messages["u"]["childrenIds"] == ["M"]
        assert m["meta"]["openclaw_chain"] == ["S", "R"] and "openclaw_open" not in m["meta"]
        with store.engine.connect() as conn:
            rows = dict(
                conn.execute(text("select id, parent_id from chat_message where chat_id = :c"), {"c": chat_id}).all()
            )
        assert rows == {f"{chat_id}-u": None, f"{chat_id}-M": "u"}
        # Again: X is gone, nothing is written.
        again = store.absorb_recovery(chat_id, "M", source="S", recovery="R", recovery_message_id="X", user_id=USER)
        assert isinstance(again, NotAbsorbed)
    finally:
        store.engine.dispose()


@pytest.mark.parametrize(
    "case", ["recovery continued", "recovery unfinished", "another run", "M continued", "M holds the recovery"]
)
def test_a_recoverys_message_is_absorbed_only_while_it_is_finished_with_that_run_alone(
    db_url: str | None, sqlite_url: str, case: str
) -> None:
    """The write is conditional: the recovery's message must still be finished with exactly that run (no chain past
    it, not owed), and M's chain must not go on past the cut run (a continuation wrote M). Else nothing is written.
    M already naming the recovery in its chain (the other process linked it, in a race with the message of its own
    this one made): M keeps what it holds, and the double goes."""
    store = _store_on(db_url, sqlite_url)
    chat_id = f"absorb-{uuid.uuid4()}"
    recovery_meta = {
        "recovery continued": {"openclaw_run": "R", "openclaw_chain": ["R", "R2"]},
        "recovery unfinished": {"openclaw_run": "R", "openclaw_open": True},
        "another run": {"openclaw_run": "Q"},
    }.get(case)
    m_chain = {"M continued": ["S", "resume-1"], "M holds the recovery": ["S", "R"]}.get(case)
    try:
        store.create_chat(chat_id, USER, chat=_two_replies_chat(chat_id, recovery_meta=recovery_meta, m_chain=m_chain))
        before = store.read_chat(chat_id)
        result = store.absorb_recovery(chat_id, "M", source="S", recovery="R", recovery_message_id="X", user_id=USER)
        after = store.read_chat(chat_id)
        if case == "M holds the recovery":
            assert isinstance(result, Absorbed)
            assert set(after["history"]["messages"]) == {"u", "M"}
            assert after["history"]["messages"]["M"]["output"] == before["history"]["messages"]["M"]["output"]
        else:
            assert isinstance(result, NotAbsorbed) and after == before
    finally:
        store.engine.dispose()


def test_removing_a_message_hangs_its_children_from_its_parent_in_its_place() -> None:
    chat = {
        "history": {
            "currentId": "X",
            "messages": {
                "p": {"id": "p", "parentId": None, "childrenIds": ["a", "X", "b"], "role": "user"},
                "a": {"id": "a", "parentId": "p", "childrenIds": [], "role": "assistant"},
                "X": {"id": "X", "parentId": "p", "childrenIds": ["c1", "c2"], "role": "assistant"},
                "b": {"id": "b", "parentId": "p", "childrenIds": [], "role": "assistant"},
                "c1": {"id": "c1", "parentId": "X", "childrenIds": [], "role": "assistant"},
                "c2": {"id": "c2", "parentId": "X", "childrenIds": [], "role": "assistant"},
            },
        }
    }
    changed = tree.remove_message(chat, "X")
    messages = chat["history"]["messages"]
    assert "X" not in messages and messages["p"]["childrenIds"] == ["a", "c1", "c2", "b"]
    assert messages["c1"]["parentId"] == messages["c2"]["parentId"] == "p"
    assert {m["id"] for m in changed} == {"p", "c1", "c2"} and chat["history"]["currentId"] == "c2"
    assert tree.remove_message(chat, "X") == []


@pytest.mark.parametrize("case", ["below", "below its children", "not below"])
def test_a_message_made_below_its_recoverys_takes_the_recoverys_place(case: str) -> None:
    """Fuzz seed 41332 (shrunk): the process holding the cut run's message M came back last and made M below the
    recovery's own message X and a later run's L (u, X, L, M); made one reply (``absorb_recovery``), M goes where X
    was, above L: run-start order. ``above`` tells whether X is above M at all (else X only goes, as before)."""

    def node(i: str, parent: str | None, children: list[str]) -> dict[str, object]:
        return {"id": i, "parentId": parent, "childrenIds": children, "role": "assistant"}

    tail = ["c"] if case == "below its children" else []
    messages = {
        "u": {**node("u", None, ["X"]), "role": "user"},
        "X": node("X", "u", ["L"]),
        "L": node("L", "X", ["M"]),
        "M": node("M", "L", tail),
    }
    if tail:
        messages["c"] = node("c", "M", [])
    chat = {"history": {"currentId": tail[0] if tail else "M", "messages": messages}}
    if case == "not below":
        assert not tree.above(messages, "M", "X") and not tree.above(messages, "L", "X")
        return
    assert tree.above(messages, "X", "M") and not tree.above(messages, "M", "X")
    changed = tree.take_place(chat, "M", "X")
    assert "X" not in messages and messages["u"]["childrenIds"] == ["M"]
    assert messages["M"]["parentId"] == "u" and messages["M"]["childrenIds"] == ["L"]
    assert messages["L"]["parentId"] == "M" and messages["L"]["childrenIds"] == tail
    if tail:
        assert messages["c"]["parentId"] == "L"
    assert {m["id"] for m in changed} == {"u", "M", "L", *tail}
    assert chat["history"]["currentId"] == (tail[0] if tail else "L")


def test_a_mirror_row_fills_every_chat_message_column() -> None:
    """The ``chat_message`` row owc writes for a message names every column of the table (``status_history`` only
    when the message has status lines): PostgreSQL's one-statement write binds each as ``m_<column>``, so a column
    added to the schema without its value would fail every write there, and only there."""
    from owc.store.schema import chat_message
    from owc.store.store import _MIRROR_ROW, _mirror_row

    columns = set(chat_message.columns.keys())
    plain = _mirror_row("c", "u", {"id": "m", "role": "assistant"}, 1)
    with_status = _mirror_row("c", "u", {"id": "m", "statusHistory": [{"description": "x"}]}, 1)
    assert set(plain) == set(_MIRROR_ROW) == columns - {"status_history"}
    assert set(with_status) == columns
