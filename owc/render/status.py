"""A message's status lines (Open WebUI's ``statusHistory``): what the tab says is happening to a reply. Pure.

Open WebUI 0.12.4 keeps a message's ``status`` events as a list, ``statusHistory``, in the chat JSON and in the
``chat_message.status_history`` column (``Chats.add_message_status_to_chat_by_id_and_message_id``: each event is
appended under the row lock). Its page shows the **last** entry above the reply, shimmering while that entry says
``done: false`` (``StatusHistory.svelte``, ``StatusItem.svelte``); a click unfolds the whole list, every entry shown
as past. So a message has at most one *open* line, its last entry when not done, and an entry appended after it
closes it: a ``done: true`` entry (the line no longer holds, or its outcome) or another open line (what holds now).

Which line is open for a message, and what each input opens or closes, is this module's machine (``StatusLines``,
one per run a process writes, in the manner of ``owc/rules/lifecycle.py``): the writer, the run table and the Pipe's
request feed it what happened and deliver the entries it appends (to the message's ``statusHistory`` and to the
tabs). The lines (issue 25, item 2; the old Pipe's, inventory row C8):

* tool: a tool runs, "Running <tool>..."; closed by "<tool> done" (its result, or the message's end);
* drop: the connection drops, "Gateway connection lost, reconnecting"; closed by "Reconnected" (the next hello), at
  the message's end by "Gateway connection lost";
* queued: a user turn waits for the run before it, "Queued behind the current reply"; closed by "Started after the
  reply before it", at the end by "Ended before it started";
* recovery: M kept open for the Gateway's recovery, "Waiting for the Gateway to resume this reply"; closed by
  "Resumed after the Gateway restarted", at the end by "Not resumed: nobody continued it";
* resume: M kept open for owc's resume, "Waiting to resume this reply"; closed by "Resumed by owc after the Gateway
  stopped", at the end as a recovery line.

"Stopped" (a Stop) and the "Resumed ..." lines close whatever is open, and are said even when nothing is. Every path
that finishes a message closes its open line: the machine's ``Ended`` (a finalize, a writer that failed), and, for a
line another process or request opened, the store's finishing write (``settle``): a finished message never keeps a
spinning line (Open WebUI's own progress rows stay spinning after a Stop: its bug #21350; owc's must not).

Each entry carries its kind under ``"owc"`` (Open WebUI keeps and ignores unknown keys), so whoever finishes the
message knows how to close a line another party opened.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from owc.render import ask_card, seam

#: The key of an entry that names its line's kind.
KIND_KEY = "owc"

DROPPED = "Gateway connection lost, reconnecting"
RECONNECTED = "Reconnected"
DROP_ENDED = "Gateway connection lost"
QUEUED = "Queued behind the current reply"
STARTED = "Started after the reply before it"
QUEUE_ENDED = "Ended before it started"
RUNNING = "Running {tool}..."
TOOL_DONE = "{tool} done"
#: An ``ask_user`` call (``owc.render.ask_card``) waits for a person, not a tool: said so, and closed in words.
ASKING = "Waiting for your answer..."
ASKED = "Question closed"
STOPPED = "Stopped"
WAIT_RECOVERY = "Waiting for the Gateway to resume this reply"
WAIT_RESUME = "Waiting to resume this reply"
NOT_RESUMED = "Not resumed: nobody continued it"
#: The "Resumed ..." lines are the seams' words (``owc.render.seam``).
RESUMED_RECOVERY = seam.RECOVERED
RESUMED_OWC = seam.RESUMED


class Kind(enum.Enum):
    TOOL = "tool"
    DROP = "drop"
    QUEUED = "queued"
    RECOVERY = "recovery"
    RESUME = "resume"
    #: A line said once, done at once ("Stopped", "Reconnected", "Resumed ..."): it never stays open.
    SAID = "said"
    #: An open line owc did not make (no kind): closed at the message's end by saying it again, done.
    OTHER = "other"


@attrs.frozen
class Line:
    """The open line: its kind and what it says (a tool line: the tool's name)."""

    kind: Kind
    description: str
    tool: str | None = None


# ---------------------------------------------------------------------------------------------------- inputs


@attrs.frozen
class Queued:
    """A user turn waits for the session's run before it."""


@attrs.frozen
class Started:
    """The run began (its first event reached owc)."""


@attrs.frozen
class Tools:
    """The run's newest tool call still without a result (``TurnRenderer.running_tool``), None when none runs."""

    running: str | None


@attrs.frozen
class Dropped:
    """The Gateway connection closed while this process held the run's message."""


@attrs.frozen
class Reconnected:
    """The next connection's hello carried the run on."""


@attrs.frozen
class Waiting:
    """The owner rule kept M open for a continuation: the Gateway's recovery (``by_owc`` False) or owc's resume."""

    by_owc: bool


@attrs.frozen
class Resumed:
    """A continuation claimed M: ``run_id`` is the continuing run (a resume owc sent, or the Gateway's recovery)."""

    run_id: str


@attrs.frozen
class Stopped:
    """The user's Stop ended the run."""


@attrs.frozen
class Ended:
    """M is finished (or its writer gave up on it): the open line, if any, is closed."""


@attrs.frozen
class Told:
    """Lines said once, done at once, that change nothing open: the usage line after a finished reply
    (``owc.render.usage``)."""

    texts: tuple[str, ...]


Input = Queued | Started | Tools | Dropped | Reconnected | Waiting | Resumed | Stopped | Ended | Told
#: Every input type, for the exhaustive cell-by-cell test.
INPUT_TYPES: tuple[type, ...] = (
    Queued,
    Started,
    Tools,
    Dropped,
    Reconnected,
    Waiting,
    Resumed,
    Stopped,
    Ended,
    Told,
)


def entry(line: Line, *, done: bool) -> dict[str, Any]:
    """The ``statusHistory`` entry of a line: Open WebUI's ``{description, done}``, and its kind."""
    return {"description": line.description, "done": done, KIND_KEY: line.kind.value}


def said(description: str) -> Line:
    return Line(Kind.SAID, description)


def tool_line(name: str) -> Line:
    if name == ask_card.NAME:
        return Line(Kind.TOOL, ASKING, name)
    return Line(Kind.TOOL, RUNNING.format(tool=name), name)


def ending(line: Line) -> Line:
    """The line that closes ``line`` at the message's end (the run is over, whatever held)."""
    if line.kind is Kind.TOOL:
        if line.tool == ask_card.NAME:
            return said(ASKED)
        return said(TOOL_DONE.format(tool=line.tool or "tool"))
    if line.kind is Kind.DROP:
        return said(DROP_ENDED)
    if line.kind is Kind.QUEUED:
        return said(QUEUE_ENDED)
    if line.kind in (Kind.RECOVERY, Kind.RESUME):
        return said(NOT_RESUMED)
    return said(line.description)


def open_line(stored: Mapping[str, Any] | None) -> Line | None:
    """The line a stored entry leaves open (None: it is done, or no entry of Open WebUI's shape)."""
    if not isinstance(stored, Mapping) or stored.get("done") is not False:
        return None
    description = stored.get("description")
    if not isinstance(description, str):
        return None
    try:
        kind = Kind(stored.get(KIND_KEY))
    except ValueError:
        kind = Kind.OTHER
    tool = None
    if kind is Kind.TOOL and description == ASKING:
        tool = ask_card.NAME
    elif kind is Kind.TOOL and description.startswith("Running ") and description.endswith("..."):
        tool = description[len("Running ") : -len("...")]
    return Line(kind, description, tool)


def settle(
    history: Sequence[Any] | None, entries: Sequence[Mapping[str, Any]], *, finished: bool
) -> list[dict[str, Any]]:
    """What a write appends to a message's ``statusHistory`` (as stored: ``history``): ``entries``, then, when the
    write finishes the message and its last line would be left open (one owc's writer did not know of: another
    process's, a request's), that line's closing. A finished message never keeps an open line."""
    out = [dict(e) for e in entries]
    if finished:
        last = out[-1] if out else (history[-1] if history else None)
        line = open_line(last)
        if line is not None:
            out.append(entry(ending(line), done=True))
    return out


# ------------------------------------------------------------------------------------------------ the machine


@attrs.define
class StatusLines:
    """One run's status lines as this process says them: the open line, and the entries decided but not yet
    delivered (``take``). ``apply`` returns what an input appends."""

    open: Line | None = None
    pending: list[dict[str, Any]] = attrs.field(factory=list)
    #: This machine has appended (or adopted) something: a stored line it finds later is not news to it.
    known: bool = False
    #: The message's end was said (``Stopped`` or ``Ended``).
    ended: bool = False
    #: The run's "Resumed ..." line was said: once per run, whatever claims its writers make.
    resumed: bool = False

    def apply(self, event: Input) -> list[dict[str, Any]]:
        handler = _TABLE[(self.open.kind if self.open is not None else None, type(event))]
        added = handler(self, event)
        if isinstance(event, (Stopped, Ended)):
            self.ended = True
        if added:
            self.known = True
            self.pending.extend(added)
        return added

    def take(self) -> list[dict[str, Any]]:
        """The entries to deliver now (the caller appends them to ``statusHistory`` and tells the tabs)."""
        out, self.pending = self.pending, []
        return out

    def give_back(self, entries: Sequence[dict[str, Any]]) -> None:
        """Entries a delivery could not write (the database refused): delivered with the next ones, first."""
        self.pending[:0] = list(entries)

    def adopt(self, history: Sequence[Any] | None) -> None:
        """The message as stored (a take-over, a continuation's claim): the line it leaves open is this machine's
        open line, unless this machine has said something already (it knows better: its own lines are stored)."""
        if self.known or not history:
            return
        self.open = open_line(history[-1])
        self.known = True

    # ------------------------------------------------------------------ what the transitions share

    def _open(self, line: Line) -> list[dict[str, Any]]:
        self.open = line
        return [entry(line, done=False)]

    def _close(self, line: Line) -> list[dict[str, Any]]:
        """Say ``line`` done: the open line, if any, is closed by it."""
        self.open = None
        return [entry(line, done=True)]


Handler = Callable[[StatusLines, Input], list[dict[str, Any]]]
_OPEN_KINDS: tuple[Kind | None, ...] = (None, Kind.TOOL, Kind.DROP, Kind.QUEUED, Kind.RECOVERY, Kind.RESUME, Kind.OTHER)
_TABLE: dict[tuple[Kind | None, type], Handler] = {}


def _on(kinds: Kind | tuple[Kind | None, ...] | None, *inputs: type) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for kind in kinds if isinstance(kinds, tuple) else (kinds,):
            for event in inputs:
                assert (kind, event) not in _TABLE, (kind, event)
                _TABLE[(kind, event)] = fn
        return fn

    return register


def _nothing(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    return []


@_on(None, Queued)
def _queued(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    return lines._open(Line(Kind.QUEUED, QUEUED))


# A run already going (or held, dropped, waiting) is not queued behind anything new.
_on((Kind.TOOL, Kind.DROP, Kind.QUEUED, Kind.RECOVERY, Kind.RESUME, Kind.OTHER), Queued)(_nothing)


@_on(Kind.QUEUED, Started)
def _started(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    return lines._close(said(STARTED))


_on((None, Kind.TOOL, Kind.DROP, Kind.RECOVERY, Kind.RESUME, Kind.OTHER), Started)(_nothing)


@_on((None, Kind.RECOVERY, Kind.RESUME, Kind.OTHER), Tools)
def _tools(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert isinstance(event, Tools)
    if event.running is None:
        return []
    return lines._open(tool_line(event.running))  # the run is at work: what held before no longer does


@_on(Kind.QUEUED, Tools)
def _queued_tools(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert isinstance(event, Tools)
    if event.running is None:
        return []
    return [*lines._close(said(STARTED)), *lines._open(tool_line(event.running))]


@_on(Kind.TOOL, Tools)
def _tool_tools(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert isinstance(event, Tools) and lines.open is not None
    if event.running == lines.open.tool:
        return []
    if event.running is None:
        return lines._close(ending(lines.open))
    return lines._open(tool_line(event.running))  # another call runs now (the newest): its line replaces


# Nothing of the run reaches owc while the connection is down; a tool seen running then is said again once back.
_on(Kind.DROP, Tools)(_nothing)


@_on((None, Kind.TOOL, Kind.QUEUED, Kind.RECOVERY, Kind.RESUME, Kind.OTHER), Dropped)
def _dropped(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    return lines._open(Line(Kind.DROP, DROPPED))


_on(Kind.DROP, Dropped)(_nothing)


@_on(Kind.DROP, Reconnected)
def _reconnected(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    return lines._close(said(RECONNECTED))


_on((None, Kind.TOOL, Kind.QUEUED, Kind.RECOVERY, Kind.RESUME, Kind.OTHER), Reconnected)(_nothing)


@_on((None, Kind.TOOL, Kind.DROP, Kind.QUEUED, Kind.OTHER), Waiting)
def _waiting(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert isinstance(event, Waiting)
    out = lines._close(said(RECONNECTED)) if lines.open is not None and lines.open.kind is Kind.DROP else []
    if event.by_owc:
        return [*out, *lines._open(Line(Kind.RESUME, WAIT_RESUME))]
    return [*out, *lines._open(Line(Kind.RECOVERY, WAIT_RECOVERY))]


@_on((Kind.RECOVERY, Kind.RESUME), Waiting)
def _waiting_again(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert isinstance(event, Waiting) and lines.open is not None
    if (lines.open.kind is Kind.RESUME) == event.by_owc:
        return []
    return _waiting(lines, event)


@_on(_OPEN_KINDS, Resumed)
def _resumed(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert isinstance(event, Resumed)
    if lines.resumed:
        return []
    lines.resumed = True
    return lines._close(said(seam.words(event.run_id)))


@_on(_OPEN_KINDS, Stopped)
def _stopped(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    return lines._close(said(STOPPED))


@_on((Kind.TOOL, Kind.DROP, Kind.QUEUED, Kind.RECOVERY, Kind.RESUME, Kind.OTHER), Ended)
def _ended(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert lines.open is not None
    return lines._close(ending(lines.open))


_on(None, Ended)(_nothing)


@_on(None, Told)
def _told(lines: StatusLines, event: Input) -> list[dict[str, Any]]:
    assert isinstance(event, Told)
    return [entry(said(text), done=True) for text in event.texts]


# Said only once nothing is open (after the message's end): a done line behind an open one would hide it.
_on((Kind.TOOL, Kind.DROP, Kind.QUEUED, Kind.RECOVERY, Kind.RESUME, Kind.OTHER), Told)(_nothing)


# Kind.OTHER takes what no open line of owc's would: Queued, Started, Reconnected do nothing there (above).
assert all((kind, event) in _TABLE for kind in _OPEN_KINDS for event in INPUT_TYPES), "a cell without a rule"
