"""A message's status lines (``owc/render/status.py``), tested without a loop: every open line x every input, the
store's closing of a line another party left open, and the lifecycle's promise that every opened line is closed on
every path (terminal, Stop, handover, drop, finalize, failure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owc.render import status
from owc.render.status import (
    INPUT_TYPES,
    Dropped,
    Ended,
    Kind,
    Line,
    Queued,
    Reconnected,
    Resumed,
    Started,
    StatusLines,
    Stopped,
    Told,
    Tools,
    Waiting,
    open_line,
    settle,
)

RESUME_RUN = "msg-7d0c4a52-3c1e-4c55-9a51-0c2b8f1e6a10-0b6b2cb0-6d59-5d2b-9d1e-2f7c7e0c1a11-resume-1"
INPUTS: dict[str, Any] = {
    "Queued": Queued(),
    "Started": Started(),
    "Tools.none": Tools(None),
    "Tools.exec": Tools("exec"),
    "Tools.read": Tools("read"),
    "Dropped": Dropped(),
    "Reconnected": Reconnected(),
    "Waiting.gw": Waiting(by_owc=False),
    "Waiting.owc": Waiting(by_owc=True),
    "Resumed.gw": Resumed("5f1d2c3b-0000-4000-8000-000000000001"),
    "Resumed.owc": Resumed(RESUME_RUN),
    "Stopped": Stopped(),
    "Ended": Ended(),
    "Told": Told(("Context 10 / 128k (0.0%)",)),
}
#: The line each state starts from (a fresh machine with that line open).
OPEN: dict[str, Line | None] = {
    "none": None,
    "tool": status.tool_line("exec"),
    "drop": Line(Kind.DROP, status.DROPPED),
    "queued": Line(Kind.QUEUED, status.QUEUED),
    "recovery": Line(Kind.RECOVERY, status.WAIT_RECOVERY),
    "resume": Line(Kind.RESUME, status.WAIT_RESUME),
    "other": Line(Kind.OTHER, "Searching the web"),
}

#: From each open line: input -> the entries appended (``+text`` open, ``=text`` done, ``;`` between two); the line
#: left open is the last one appended if it is open (``+``), else none. ``-``: nothing appended, the line as it was.
#: Reviewed cell by cell against issue 25 item 2 and the old Pipe's row C8.
TABLE = """
none:
    Queued: +Queued behind the current reply
    Started: -
    Tools.none: -
    Tools.exec: +Running exec...
    Tools.read: +Running read...
    Dropped: +Gateway connection lost, reconnecting
    Reconnected: -
    Waiting.gw: +Waiting for the Gateway to resume this reply
    Waiting.owc: +Waiting to resume this reply
    Resumed.gw: =Resumed after the Gateway restarted
    Resumed.owc: =Resumed by owc after the Gateway stopped
    Stopped: =Stopped
    Ended: -
    Told: =Context 10 / 128k (0.0%)
tool:
    Queued: -
    Started: -
    Tools.none: =exec done
    Tools.exec: -
    Tools.read: +Running read...
    Dropped: +Gateway connection lost, reconnecting
    Reconnected: -
    Waiting.gw: +Waiting for the Gateway to resume this reply
    Waiting.owc: +Waiting to resume this reply
    Resumed.gw: =Resumed after the Gateway restarted
    Resumed.owc: =Resumed by owc after the Gateway stopped
    Stopped: =Stopped
    Ended: =exec done
    Told: -
drop:
    Queued: -
    Started: -
    Tools.none: -
    Tools.exec: -
    Tools.read: -
    Dropped: -
    Reconnected: =Reconnected
    Waiting.gw: =Reconnected; +Waiting for the Gateway to resume this reply
    Waiting.owc: =Reconnected; +Waiting to resume this reply
    Resumed.gw: =Resumed after the Gateway restarted
    Resumed.owc: =Resumed by owc after the Gateway stopped
    Stopped: =Stopped
    Ended: =Gateway connection lost
    Told: -
queued:
    Queued: -
    Started: =Started after the reply before it
    Tools.none: -
    Tools.exec: =Started after the reply before it; +Running exec...
    Tools.read: =Started after the reply before it; +Running read...
    Dropped: +Gateway connection lost, reconnecting
    Reconnected: -
    Waiting.gw: +Waiting for the Gateway to resume this reply
    Waiting.owc: +Waiting to resume this reply
    Resumed.gw: =Resumed after the Gateway restarted
    Resumed.owc: =Resumed by owc after the Gateway stopped
    Stopped: =Stopped
    Ended: =Ended before it started
    Told: -
recovery:
    Queued: -
    Started: -
    Tools.none: -
    Tools.exec: +Running exec...
    Tools.read: +Running read...
    Dropped: +Gateway connection lost, reconnecting
    Reconnected: -
    Waiting.gw: -
    Waiting.owc: +Waiting to resume this reply
    Resumed.gw: =Resumed after the Gateway restarted
    Resumed.owc: =Resumed by owc after the Gateway stopped
    Stopped: =Stopped
    Ended: =Not resumed: nobody continued it
    Told: -
resume:
    Queued: -
    Started: -
    Tools.none: -
    Tools.exec: +Running exec...
    Tools.read: +Running read...
    Dropped: +Gateway connection lost, reconnecting
    Reconnected: -
    Waiting.gw: +Waiting for the Gateway to resume this reply
    Waiting.owc: -
    Resumed.gw: =Resumed after the Gateway restarted
    Resumed.owc: =Resumed by owc after the Gateway stopped
    Stopped: =Stopped
    Ended: =Not resumed: nobody continued it
    Told: -
other:
    Queued: -
    Started: -
    Tools.none: -
    Tools.exec: +Running exec...
    Tools.read: +Running read...
    Dropped: +Gateway connection lost, reconnecting
    Reconnected: -
    Waiting.gw: +Waiting for the Gateway to resume this reply
    Waiting.owc: +Waiting to resume this reply
    Resumed.gw: =Resumed after the Gateway restarted
    Resumed.owc: =Resumed by owc after the Gateway stopped
    Stopped: =Stopped
    Ended: =Searching the web
    Told: -
"""


def _table() -> list[tuple[str, str, str]]:
    cells = []
    state = ""
    for raw in TABLE.strip().splitlines():
        line = raw.strip()
        if line.endswith(":") and not raw.startswith(" "):
            state = line[:-1]
            continue
        name, expected = line.split(":", 1)
        cells.append((state, name.strip(), expected.strip()))
    return cells


CELLS = _table()


def test_the_table_covers_every_cell() -> None:
    assert {(s, i) for s, i, _ in CELLS} == {(s, i) for s in OPEN for i in INPUTS}
    assert {type(e) for e in INPUTS.values()} == set(INPUT_TYPES)


def _machine(state: str) -> StatusLines:
    lines = StatusLines()
    lines.open = OPEN[state]
    return lines


@pytest.mark.parametrize(("state", "name", "expected"), CELLS, ids=[f"{s}-{i}" for s, i, _ in CELLS])
def test_a_cell(state: str, name: str, expected: str) -> None:
    lines = _machine(state)
    added = lines.apply(INPUTS[name])
    if expected == "-":
        assert added == [] and lines.open == OPEN[state]
        return
    wanted = [(e.strip()[1:], e.strip()[0] == "=") for e in expected.split(";")]
    assert [(e["description"], e["done"]) for e in added] == wanted
    left = wanted[-1][0] if not wanted[-1][1] else ""
    assert (lines.open.description if lines.open is not None else "") == left
    assert lines.pending == added, "what an input appends waits for its delivery"
    # The open line is the last entry exactly when one is open: nothing ever spins behind a done entry.
    assert added[-1]["done"] is (lines.open is None)
    assert all(e[status.KIND_KEY] in {k.value for k in Kind} for e in added)


def test_take_delivers_once_and_give_back_puts_entries_first() -> None:
    lines = StatusLines()
    lines.apply(Tools("exec"))
    taken = lines.take()
    assert [e["description"] for e in taken] == ["Running exec..."] and lines.take() == []
    lines.apply(Tools(None))
    lines.give_back(taken)  # the database refused the first delivery: it goes first with the next
    assert [e["description"] for e in lines.take()] == ["Running exec...", "exec done"]


def test_a_stored_open_line_is_adopted_only_by_a_machine_that_said_nothing() -> None:
    stored = [status.entry(Line(Kind.RECOVERY, status.WAIT_RECOVERY), done=False)]
    fresh = StatusLines()
    fresh.adopt(stored)
    assert fresh.open == Line(Kind.RECOVERY, status.WAIT_RECOVERY)
    assert [e["description"] for e in fresh.apply(Ended())] == ["Not resumed: nobody continued it"]
    knows = StatusLines()
    knows.apply(Dropped())
    knows.apply(Reconnected())  # its own lines are stored after the stored one: it knows better
    knows.adopt([*stored, status.entry(Line(Kind.DROP, status.DROPPED), done=False)])
    assert knows.open is None


def test_open_line_reads_owcs_entries_and_others() -> None:
    assert open_line({"description": "Running exec...", "done": False, "owc": "tool"}) == status.tool_line("exec")
    assert open_line({"description": "Searching", "done": False}) == Line(Kind.OTHER, "Searching")
    assert open_line({"description": "Searched", "done": True}) is None
    assert open_line({"description": None, "done": False}) is None
    assert open_line("nonsense") is None  # type: ignore[arg-type]


@pytest.mark.parametrize("state", [s for s in OPEN if OPEN[s] is not None])
def test_the_store_closes_a_line_left_open_when_it_finishes_the_message(state: str) -> None:
    """``settle``: a finishing write closes whatever the stored history leaves open (another process's line, the
    request's), with the line's own end; a write that does not finish it appends only what it was given."""
    line = OPEN[state]
    assert line is not None
    history = [status.entry(line, done=False)]
    closed = settle(history, [], finished=True)
    assert len(closed) == 1 and closed[0]["done"] is True
    assert closed == [status.entry(status.ending(line), done=True)]
    assert settle(history, [], finished=False) == []
    # Entries given that end open are closed after them; entries that end done need nothing more.
    opened = [status.entry(status.tool_line("read"), done=False)]
    assert [e["description"] for e in settle(history, opened, finished=True)] == ["Running read...", "read done"]
    said = [status.entry(status.said(status.STOPPED), done=True)]
    assert settle(history, said, finished=True) == said
    assert settle([], [], finished=True) == [] and settle(None, [], finished=True) == []


PATHS = {
    # How a run's message ends: the last input a finished message's lines get, whatever came before.
    "terminal": [Ended()],
    "stop": [Stopped()],
    "handover": [Ended()],  # the request's lines go on in the writer's machine: the same object, then its finalize
    "drop": [Dropped(), Reconnected(), Ended()],
    "finalize after a wait": [Waiting(by_owc=False), Resumed("r2"), Ended()],
    "nobody continued": [Waiting(by_owc=True), Ended()],
    "failure": [Ended()],  # a writer that failed says Ended (``write_run``)
}

EVENTS = st.sampled_from(list(INPUTS.values()))


@pytest.mark.parametrize("path", PATHS, ids=list(PATHS))
@given(before=st.lists(EVENTS, max_size=12))
def test_every_opened_line_is_closed_on_every_path(path: str, before: list[Any]) -> None:
    """Whatever happened before (any inputs, in any order), the path that finishes the message leaves no line open,
    and at every step the open line is the history's last entry (a line is closed by what follows it)."""
    lines = StatusLines()
    history: list[dict[str, Any]] = []
    for event in [*before, *PATHS[path]]:
        history += lines.apply(event)
        if history:
            assert (history[-1]["done"] is False) == (lines.open is not None)
            assert lines.open is None or history[-1]["description"] == lines.open.description
    assert lines.open is None
    assert not history or history[-1]["done"] is True
    # And the store agrees: finishing the message appends nothing more.
    assert settle(history, [], finished=True) == []


def test_a_run_says_resumed_once_whatever_claims_its_writers_make() -> None:
    """A continuation's writer may claim M more than once (a drop, another connection): its "Resumed ..." line is
    said once per run, by the machine (``StatusLines.resumed``), not by a flag each caller keeps."""
    from owc.render.status import Resumed, StatusLines

    machine = StatusLines()
    first = machine.apply(Resumed("r2"))
    assert first and machine.resumed
    assert machine.apply(Resumed("r2")) == []
