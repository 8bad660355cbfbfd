"""Which closed runs of a session are owed a message: the ended-while-away rule (seed 000 section 2.1.3, case 4)
and Open WebUI's orphan stubs (P20). Pure: a transcript and what the chat holds in, run ids out.

A run is owed a message when it is closed (not the session's active run) and either

* its message exists unfinished (``done: false``: Open WebUI's own stub of a request that died, or a message
  whose writer died), whatever its transcript holds: it is finished from the transcript; or
* its message does not exist and the run's newest transcript message is not older than the watermark: the time the
  chat was last written (a process's first hello) or the last Gateway event the previous connection saw (a
  reconnect). Older runs are the chat's history from before owc (or runs that rightly have no message): never
  given one now. Whether the run showed anything is the transcript's to say (a run that said only a sentinel
  gets no message); the writer checks that.

Two recorded timestamps are compared; nothing waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from owc.protocol import ChatHistory
from owc.rules.finished import message_finished

#: How far this host's clock may be ahead of the Gateway's when a process's first pass compares a chat's own time
#: (Open WebUI's ``updated_at``, this host) with the session's and transcript's times (the Gateway's). Two hosts'
#: clocks differ (NTP keeps them within milliseconds, not exactly), and the simulator runs on Trio's clock, a few
#: ms behind the wall's: a run that ended unseen just before the chat's own write (by the Gateway's clock) was
#: taken for history from before owc and never given its message (fuzzer seeds 3669 and 9652, 1 play in 10 under
#: load). A clock comparison with a margin, not a timer: nothing waits on it. Its cost: a message a user
#: deleted within this margin of its run's end comes back at the next process's first pass. Larger skews are
#: covered by transcript order (``runs_owed(after_last_message=, last_run=)``) where the chat holds a run.
HOST_CLOCK_MARGIN_MS = 5_000


def host_watermark(chat_ms: int) -> int:
    """A process's first watermark from a chat's own time on this host (``HOST_CLOCK_MARGIN_MS``)."""
    return chat_ms - HOST_CLOCK_MARGIN_MS


@attrs.frozen
class Owed:
    run_id: str
    message_id: str
    #: The message exists unfinished: finish it even if the transcript shows nothing of the run.
    unfinished: bool
    #: The timestamp of the run's first transcript message (its place in the chat's run order), if any.
    first_ms: int | None = None


def transcript_places(history: ChatHistory) -> dict[str, tuple[int | None, int]]:
    """Each run of the window: (its first message's timestamp, its place among the window's runs). A session runs
    one run at a time, so the transcript's order is the runs' start order, exact even where times are equal."""
    return {run_id: (first, index) for index, (run_id, (first, _)) in enumerate(_run_times(history).items())}


def run_order(history: ChatHistory | None) -> tuple[str, ...]:
    """The window's runs in transcript order: a session runs one run at a time, so this is their start order."""
    return () if history is None else tuple(_run_times(history))


def _run_times(history: ChatHistory) -> dict[str, tuple[int | None, int]]:
    """Each run of the window, in order of first appearance: (its first message's timestamp, its newest)."""
    times: dict[str, tuple[int | None, int]] = {}
    for message in history.messages:
        run_id = message.user_run_id or message.assistant_run_id
        if run_id is None and message.role == "toolResult":
            run_id = (
                (message.raw.get("__openclaw") or {}).get("runId")
                if isinstance(message.raw.get("__openclaw"), Mapping)
                else None
            )
        if not isinstance(run_id, str) or not run_id:
            continue
        first, newest = times.get(run_id, (message.timestamp, 0))
        times[run_id] = (first, max(newest, message.timestamp or 0))
    return times


def runs_owed(
    history: ChatHistory,
    *,
    messages: Mapping[str, Any],
    active: frozenset[str],
    active_unknown: bool,
    watermark_ms: int,
    message_id_of: Callable[[str], str | None],
    after_last_message: bool = False,
    last_run: str | None = None,
) -> list[Owed]:
    """The closed runs of ``history`` owed a message, in transcript order (so they chain in run order).

    ``messages``: the chat's ``history.messages``; ``active``: the session's listed active run ids;
    ``active_unknown``: the session is active but the list gave no ids (the newest run is then taken as the
    active one); ``message_id_of``: the identity rule for this session key. ``after_last_message``: the
    watermark is this host's time (a process's first pass), which the Gateway's clock may be behind: a run after
    the newest one the chat holds a message of, in transcript order, is owed whatever its time says (the
    transcript's order needs no clock; before, a run that ended while owc was down, soon after its last write,
    was taken for history from before owc when the Gateway's clock was behind: fuzzer). ``last_run``: the
    session's last run as the hello's list names it; on such a pass it is owed when the chat lacks its message,
    also when the chat holds no message of any earlier run (a Gateway clock a few ms behind this host put a run
    that ended unseen just before the chat's own write, and it was taken for history: CI, seen 1 in 30 plays).
    """
    runs = _run_times(history)
    if active_unknown and runs:
        active = active | {list(runs)[-1]}
    last_held = -1
    if after_last_message:
        for index, run_id in enumerate(runs):
            message_id = message_id_of(run_id)
            if message_id is not None and message_id in messages:
                last_held = index
    owed: list[Owed] = []
    for index, (run_id, (first, newest)) in enumerate(runs.items()):
        if run_id in active:
            continue
        message_id = message_id_of(run_id)
        if message_id is None:
            continue
        existing = messages.get(message_id)
        if isinstance(existing, Mapping):
            if not message_finished(existing) and existing.get("role", "assistant") == "assistant":
                owed.append(Owed(run_id, message_id, unfinished=True, first_ms=first))
        elif (
            newest >= watermark_ms
            or (last_held >= 0 and index > last_held)
            or (after_last_message and run_id == last_run)
        ):
            # a run at the watermark itself may have ended unseen: look
            owed.append(Owed(run_id, message_id, unfinished=False, first_ms=first))
    if not active_unknown:
        owed += _unfinished_beyond(messages, runs, active, message_id_of)
    return owed


def _unfinished_beyond(
    messages: Mapping[str, Any],
    runs: Mapping[str, Any],
    active: frozenset[str],
    message_id_of: Callable[[str], str | None],
) -> list[Owed]:
    """Unfinished messages of runs the transcript window does not show and the list does not show active: a run
    a crash cut before anything of it was stored, whose writer (another process, since gone) claimed its
    message. Nothing else would ever finish them (found by the fuzzer, ``crash-cut-open``). The writer reads
    older pages for the run; if none holds it, the message is finished with a word on why it is empty. While
    the session is active with no run ids, any of them may be its live run: left alone until a pass can tell."""
    owed = []
    for message_id, message in messages.items():
        if not isinstance(message, Mapping) or message_finished(message):
            continue
        meta = message.get("meta")
        run_id = meta.get("openclaw_run") if isinstance(meta, Mapping) else None
        if (
            isinstance(run_id, str)
            and run_id not in runs
            and run_id not in active
            and message.get("role", "assistant") == "assistant"
            and message_id_of(run_id) == message_id
        ):
            owed.append(Owed(run_id, message_id, unfinished=True))
    return owed


def goes_before_owed(place: tuple[int, int, int], owed: tuple[int, int, int] | None, *, earlier_boot: bool) -> bool:
    """A live run waiting behind a reconcile pass, at ``place`` (``Run.place``: Gateway time, 0 if its transcript
    placed it else 1, a count), begins before the run the pass owes its chat next, at ``owed`` (placed by the
    pass's transcript: rank 0; None: the pass owes nothing the run could have to follow), so it claims now.

    Claims wait only from a later run to an earlier one, so this must never say "after" of a run that began first.
    Placed by one transcript, the two are in exact order (a session runs one run at a time). Otherwise their Gateway
    times decide, and an equal millisecond says nothing of which began first: the place's tie-break (a run the
    transcript placed goes first) stands only where nothing more is known. A run first seen under an earlier boot
    than the pass's (``earlier_boot``) began before that boot, so before every run it started: its recovery, any
    run admitted after it. At an equal millisecond such a run goes first; only an owed run strictly earlier in time
    (one the earlier boot ran) comes before it. Before, the tie-break made a run the old boot showed wait for the
    new boot's recovery, which waited for the cut run it links to (``Cuts.link``), which waited for the first: a
    circle (fuzz seed 61010: the crash, the boot and its recovery in the run's own millisecond)."""
    if owed is None:
        return True
    if earlier_boot and place[1] != 0:
        return place[0] <= owed[0]
    return place < owed
