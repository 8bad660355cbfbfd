"""The intent rule (``owc/rules/intent.py``), cell by cell: what a cancel of a task meant, from the stop requests the
pages tagged. The tag read from a request; a record stored and read back; which records a reader reads (its own
user's, each once, none from before it began); the decision (a Stop anywhere wins, "Send now" keeps writing,
nothing said is unknown); the in-process record log's bounds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owc.rules.intent import (
    HEADER,
    Intent,
    Kind,
    Mark,
    StopLog,
    StopRecord,
    decide,
    kind_of,
    mark_of,
    read,
)


def rec(n: int, kind: Kind, user: str | None = "ann") -> StopRecord:
    return StopRecord(f"r{n}", kind, user)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("stop", Kind.STOP),
        ("send_now", Kind.SEND_NOW),
        (b"send_now", Kind.SEND_NOW),  # as ASGI hands headers over
        (" Stop ", Kind.STOP),
        (None, Kind.UNTOLD),  # no header: a tab without the hook, a script, another client
        ("", Kind.UNTOLD),
        ("send now", Kind.UNTOLD),
        ("reboot", Kind.UNTOLD),
        (b"\xff\xfe", Kind.UNTOLD),
    ],
)
def test_the_tag_a_stop_request_carries(value: Any, kind: Kind) -> None:
    assert kind_of(value) is kind
    assert HEADER == HEADER.lower()  # ASGI's header names are lower case


def test_a_record_is_stored_and_read_back_and_anything_else_is_no_record() -> None:
    for record in (StopRecord("a" * 32, Kind.SEND_NOW, "ann"), StopRecord("b", Kind.UNTOLD, None)):
        assert StopRecord.decode(record.encode()) == record
        assert StopRecord.decode(record.encode().encode()) == record  # Redis may hand bytes back
    for raw in (
        "",
        "not json",
        "[1, 2]",
        '{"kind": "stop", "user": "ann"}',  # no id
        '{"id": "r", "kind": "halt", "user": "ann"}',  # an unknown kind
        '{"id": "", "kind": "stop", "user": "ann"}',
        '{"id": 7, "kind": "stop", "user": "ann"}',
        '{"id": "r", "kind": "stop", "user": 7}',
        '{"id": "' + "r" * 201 + '", "kind": "stop"}',  # longer than any id Open WebUI makes
    ):
        assert StopRecord.decode(raw) is None, raw


@pytest.mark.parametrize(
    ("kinds", "intent"),
    [
        ((), Intent.UNKNOWN),  # no stop request read: an admin's stop of one task, a deleted chat
        ((Kind.UNTOLD,), Intent.UNKNOWN),  # a request nobody tagged: never stopped on a guess
        ((Kind.UNTOLD, Kind.UNTOLD), Intent.UNKNOWN),
        ((Kind.SEND_NOW,), Intent.SEND_NOW),
        ((Kind.UNTOLD, Kind.SEND_NOW), Intent.SEND_NOW),
        ((Kind.STOP,), Intent.STOP),
        ((Kind.SEND_NOW, Kind.STOP), Intent.STOP),  # Send now in one tab, Stop in another: any Stop wins
        ((Kind.STOP, Kind.SEND_NOW), Intent.STOP),
        ((Kind.UNTOLD, Kind.STOP), Intent.STOP),
    ],
)
def test_a_stop_anywhere_wins_send_now_keeps_writing_and_nothing_said_is_unknown(
    kinds: tuple[Kind, ...], intent: Intent
) -> None:
    assert decide(rec(n, k) for n, k in enumerate(kinds)) is intent


def test_a_reader_reads_its_users_records_since_it_began_each_once() -> None:
    before = [rec(1, Kind.STOP)]
    mark = mark_of(before)  # the task is registered: a Stop recorded earlier was about something else
    assert read(before, mark, "ann") == ((), mark)
    log = [*before, rec(2, Kind.SEND_NOW), rec(3, Kind.STOP, "bea")]  # bea shares the chat: her Stop is not ann's
    said, mark = read(log, mark, "ann")
    assert said == (rec(2, Kind.SEND_NOW),) and decide(said) is Intent.SEND_NOW
    assert mark == Mark(frozenset({"r1", "r2", "r3"}))  # past every record there, whoever sent it
    assert read(log, mark, "ann")[0] == ()  # read once
    assert read(log, mark, "bea")[0] == ()  # bea's task keeps its own mark; this one is ann's
    log = [*log[1:], rec(4, Kind.STOP)]  # r1 trimmed from the store meanwhile: nothing hides the new record
    said, mark = read(log, mark, "ann")
    assert said == (rec(4, Kind.STOP),) and decide(said) is Intent.STOP
    assert mark == Mark(frozenset({"r2", "r3", "r4"}))  # ids no longer stored are forgotten: it stays small


def test_two_stops_close_together_are_both_read_and_a_stop_wins() -> None:
    """Send now in tab X, Stop in tab Y: the first cancel may be read before Y's record is there (Send now: the
    writer is registered again), and Y's request then cancels the new task or finds none; either way Y's record
    is read after the registration, and it stops the run."""
    mark = mark_of([])
    said, mark = read([rec(1, Kind.SEND_NOW)], mark, "ann")
    assert decide(said) is Intent.SEND_NOW
    said, mark = read([rec(1, Kind.SEND_NOW), rec(2, Kind.STOP)], mark, "ann")
    assert decide(said) is Intent.STOP
    # Both there at the first read: one read, a Stop.
    assert decide(read([rec(1, Kind.SEND_NOW), rec(2, Kind.STOP)], mark_of([]), "ann")[0]) is Intent.STOP


def test_records_of_nobody_decide_nothing() -> None:
    """A request owc could not tie to a user (no session token) is nobody's: no task's reader takes it."""
    said, _ = read([rec(1, Kind.STOP, None)], mark_of([]), "ann")
    assert said == () and decide(said) is Intent.UNKNOWN
    assert read([rec(1, Kind.STOP, None)], mark_of([]), None)[0] == ()


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("stop"), st.sampled_from(list(Kind)), st.sampled_from(["ann", "bea"])),
            st.tuples(st.just("read")),
        ),
        max_size=60,
    )
)
def test_every_record_of_the_readers_user_is_read_exactly_once(steps: list[tuple[Any, ...]]) -> None:
    """However stops and reads interleave (fewer than ``KEEP`` stops between two reads, as one cancel per stop
    request makes it), a reader reads each record of its user recorded after it began exactly once, in order."""
    log = StopLog(keep=16)
    log.add("c", rec(0, Kind.STOP))  # before the reader began
    mark = mark_of(log.records("c"))
    made: list[StopRecord] = []
    got: list[StopRecord] = []
    pending = 0
    for n, step in enumerate(steps, start=1):
        if step[0] == "stop" and pending < 15:
            record = rec(n, step[1], step[2])
            log.add("c", record)
            made.append(record)
            pending += 1
        elif step[0] == "read":
            said, mark = read(log.records("c"), mark, "ann")
            got.extend(said)
            pending = 0
    said, mark = read(log.records("c"), mark, "ann")
    got.extend(said)
    assert got == [r for r in made if r.user_id == "ann"]


def test_the_process_log_keeps_the_newest_records_of_the_most_recently_stopped_chats() -> None:
    log = StopLog(keep=3, chats=2)
    for n in range(5):
        log.add("a", rec(n, Kind.STOP))
    assert [r.id for r in log.records("a")] == ["r2", "r3", "r4"]  # oldest first, the newest kept
    log.add("b", rec(10, Kind.SEND_NOW))
    log.add("a", rec(5, Kind.STOP))  # "a" stopped again: now the most recent
    log.add("c", rec(20, Kind.STOP))  # a third chat: "b", the least recently stopped, goes
    assert log.records("b") == () and len(log.records("a")) == 3 and len(log.records("c")) == 1
    assert log.records("never") == ()
