"""Playing a fuzz schedule through owc and judging it: the bridge between ``schedules.py`` (what to play and what it
must produce), owc's scenario player (``owc/sim/play.py``: the simulator, owc's deploys, a SQLite file) and the
oracle (``oracle.py``). Used by ``tests/test_fuzz_seeds.py`` and ``bench/fuzz_schedules.py``.

Plays run in virtual time (``virtual_time``): Trio's ``MockClock`` jumps to the next deadline only once every
task has been blocked for a few real milliseconds and no worker thread (owc's database calls) is busy, so the
Gateway's ticks, owc's reconnect backoff and a restart's downtime cost no real time, and no timer fires early
while a SQLite transaction runs in its thread (a plain ``autojump_threshold`` does not know about threads: under
load it moved the clock past owc's request timeouts in the middle of a transaction, and plays failed or hung
for reasons no real clock could produce).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing

from owc.sim.play import play_scenario

from oracle import check_database, check_expected, kind_of
from schedules import Schedule, shrinking

#: A play's own bound on Trio's clock (virtual seconds under a MockClock): a hung play is a finding, not a hang.
#: Every op and owc's settle after the last one are inside it, and the bound is itself a deadline, so a play
#: where every task waits for something that never comes jumps straight to it (``virtual_time``).
PLAY_BOUND_S = 1800

#: Known product bugs (issue 11) and what they look like, so a fixed seed set stays green until their fixes land
#: (the tests xfail such seeds, strict=False: once fixed they simply pass).
KNOWN_BUGS: dict[str, str] = {
    # Issue 24's defects as the campaign's new checks and shapes found them: teardown-done (item 1), error-unseen
    # (2), cutoff-uncut (3), streamed-lost (5) and recovery-unlinked (4, its last shape) are fixed (FIXED_BUGS).
}
#: Bugs the fuzzer found that are fixed: their shrunk reproductions are regression tests (they must pass).
FIXED_BUGS = {
    "order-read-before-claim": (
        "two deploys, chat.history failing on one: a run that ended while no deploy heard it (an announce; in the full"
        " seed a speaking heartbeat) was read by the other deploy's check (or pass) before a later run of its session"
        " had stored anything; the first deploy, which could not read the transcript (a failing read holds no later"
        " run up), gave the later runs their messages first. The early run's claim put its message under them, and its"
        " finalize ordered the line by the read from before the claim, which did not name the latest run: the line"
        " stops at a run the order does not name, and [later, earlier] stayed ([order], fuzz seed 305323, 5 plays in"
        " 20; shrunk, 27 in 100). A finalize whose transcript was read before its claim reads it again"
        " (Reading.before_claim); if that read fails, a correction puts the line in order"
    ),
    "recovery-of-unstored-heartbeat": (
        "a heartbeat began after a run that ended on its own right after a tool call (no ending message stored) and a"
        " Gateway crash cut it before it stored anything but its hidden prompt; the boot recovered the heartbeat, but"
        " owc held the earlier run as the Gateway's cut, rule E left the recovery unnamed (the prompt's turnBoundary"
        " mark on the recovery's own turn) and owc linked it into the earlier run's message, which showed the"
        " heartbeat's recovered reply ([content], [missing]: fuzz seed 150240, about one play in three). The"
        " recovery's turn right after exactly one hidden heartbeat prompt says the heartbeat was the run recovered"
        " (owc/rules/link.py heartbeat_recovered): the held cut ends without a note, the recovery has a message of its"
        " own"
    ),
    "order-finalized-unread": (
        "two deploys, no restart: chat.history failed while one deploy, connected after a run had ended, could not"
        " learn of it and let its live claim of the session's next run go on; the other, which heard the earlier run,"
        " claimed it below the later one, and neither finalize could read the transcript that puts the line in start"
        " order: chained [later, earlier] for good ([order], fuzz seed 150032, every play). A message finished"
        " without its transcript right under another run's message is kept for a correction that puts the line in"
        " order once the transcript answers (owc/runs/correct.py, ChatStore.put_in_order)"
    ),
    "correct-after-exit": (
        "a cron run called a tool while owc was down, the next deploy joined mid-run, and chat.history failed at"
        " the run's end: its message was finished from the stream (text, no card) and kept for a correction, but"
        " the deploy was killed before any tick and the correction, process-wide, went with it; nothing told the"
        " next deploy the finished message was short ([content] 0 tool cards, transcript 1; fuzz seed 212956, every"
        " play). The short finish marks M (CORRECT_MARK) and a later reconcile pass corrects a marked message"
    ),
    "queued-after-lost-final": (
        "issue 24 item 3: a heartbeat called a tool and ended final with NO_REPLY, its terminal lost in a drop; a"
        " sessions_send queued behind it ran, and a crash cut it. At the hello both runs were carried without a"
        " terminal, the owner rule gave both to the Gateway, and the later cut ended the heartbeat's message with"
        " 'a newer run took over' ([cutoff], fuzz seed 151800, every play). A run of the session heard after the"
        " carried run's last event ran after it ended: the boot did not cut it (owner.ended_before)"
    ),
    "empty-note-corrected": (
        "a run's stream joined after its tool call and its transcript unreadable at its end: a deploy finished its"
        " message empty with 'cut off before any of it was saved' although it ended final, and the correction pass"
        " that later filled it from the transcript kept the note under the card ([cutoff], fuzz seed 141646, about"
        " 2 plays in 3). The correction drops the empty finish's note once it fills the message (tree fills=True)"
    ),
    "streamed-missed-tail": (
        "issue 24 item 5: a cron run's stream had a gap (drop 4 droppable events: the tool result's among them), the"
        " run called a tool and said a text, a Gateway crash; the transcript ends at the call (a crash stores nothing"
        " of the text after it) and never_less took the stream's parting from it (a text where the transcript has the"
        " result) for a replacement, dropping the streamed text (fuzz seed 102690, every play; 107665, 82222 are a"
        " mid-run join). A missed stream is aligned at the transcript's end (never_less missed=, run_text=)"
    ),
    "silent-final-noted": (
        "issue 24 item 3: a run that ended on its own final NO_REPLY right after a tool call while owc was away (the"
        " drop), a heartbeat after it, then a container stop failed the heartbeat; at the hello the row failed under"
        " the heartbeat, so the owner rule said a newer run took over and the message ended with the cut-off note"
        " (fuzz seed 80221, every play): chat.history hides NO_REPLY, so the transcript did not show the run ended."
        " A note is dropped when the transcript shows the next run begun after the run, before any recovery turn"
    ),
    "recovery-pass-circle": (
        "issue 24 item 12: two deploys, a crash under a heartbeat queued behind an announce; the deploy whose pass the"
        " crash cut carried both runs behind it. Its next pass was at the boot's recovery, which waited for the cut"
        " heartbeat's message; the heartbeat claimed after the announce, which waited for the pass to give the"
        " recovery its message first (at one Gateway millisecond the tie-break placed the recovery first): a circle,"
        " the play hung (fuzz seed 80324; shrunk, about 1 play in 3). A run placed before the cut run a waiting"
        " recovery continues is owed nothing the pass still gives (Cuts.owed_after)"
    ),
    "aborted-newer-noted": (
        "issue 24 item 3: a run that ended aborted right after a tool call (which stores no ending message), a newer"
        " run that ended aborted, a crash; the row killed under the newer run gave the unseen run the newer-run"
        " note (fuzz seed 80211, 3 plays in 6). Fixed with silent-final-noted's"
    ),
    "recovery-unlinked": (
        "issue 24 item 4's last shape (D): two deploys, a crash under a run that stored nothing; the deploy back first"
        " never saw the run and could not name it, nor find its message (the deploy that streamed it had not claimed"
        " it yet), and gave the boot's recovery a message of its own; the other then held the cut run's message and"
        " ended it with the newer-run note ([recovery] and the pair's [order]; fresh sweep seed 60132, about 1 play"
        " in 2). Nothing in the Gateway names the run, so it is repaired: the held cut's end makes one reply of both"
        " (ChatStore.absorb_recovery: M's part, then the recovery's, chain [S, R']; the recovery's message goes), and"
        " a recovery settled by both deploys at once loses its double after the later finish (Cuts.one_reply)"
    ),
    "aborted-not-recovered": (
        "a run that ended aborted after a tool call while owc was away stores no ending message; at the hello after"
        " a Gateway crash the session's row named a later ordinary run, taken for the boot's recovery of it: M was"
        " held for a link that never came (another deploy finished M; the later run never linked here), the cut"
        " stayed and the play hung (issue 24 item 12, fuzz seed 30151). The Gateway recovers a session before any"
        " turn admitted after the boot (measured), so a run begun after the held run's last message before any"
        " recovery says it ended on its own: the hold ends, no note"
    ),
    "ended-before-boot-held": (
        "a sessions_send run ended aborted right after a tool call while owc was away (a slow-consumer close), an"
        " announce ran and ended on the same session, then a container restart: at the hello the row named the"
        " announce (done), taken for the boot's recovery of the aborted run; the announce said nothing and never"
        " claimed, so M stayed done:false and settled() waited for ever (fuzz seed 141731). The row settled"
        " before the boot began (updatedAt against the challenge's ts less uptimeMs): not the boot's recovery"
    ),
    "aborted-noted": (
        "the same reading (fuzz seed 77089): the held run ended aborted after a tool call, a later run was cut by a"
        " stop and recovered; the recovery's link found the later run and ended the held run's message with the"
        " 'newer run took over' cut-off note, on a run nothing cut ([cutoff]). No note when a run began after its"
        " last message before any recovery"
    ),
    "recovery-agent-turn-unheld": (
        "issue 24 item 4: the recovery of an agent turn whose user turn chat.history hides (a seq gap right before its"
        " messages, or the page's start) got a message of its own when no living process held the cut (owc away, or"
        " the process killed; fuzz seeds 122, 196, 274). Link rule E takes that gap for the run's own turn"
    ),
    "recovery-admitted-first": (
        "issue 24 item 4: a run the Gateway admitted between its boot and the delayed recovery (which queues behind"
        " it) ended the held cut's message with the newer-run note at its link check; the recovery then got a message"
        " of its own (fuzz seeds 48, 135). Not after a shutdown notice under the cut run, nor when the transcript"
        " says the cut run is still the one a recovery would continue"
    ),
    "recovery-delayed-unseen": (
        "issue 24 item 4: a process back after a cut it never saw: nothing told it a recovery was still to come"
        " (delayed behind a run admitted first), so the recovery claimed unchecked and got a message of its own (fuzz"
        " seeds 241, 40536). A reconcile pass now notes the run a recovery would continue (recovery_owed); link"
        " rule E passes over runs that ended on their own on a numbered page"
    ),
    "older-run-ends-held-cut": (
        "a reconcile pass opened runs that ran while owc was away after a held cut was decided, and a link check took"
        " one of them (it began before the cut run) for a run that took the session after it: the cut ended, the"
        " boot's recovery found no cut to wait for and finished M without the cut run's streamed tail (fuzz seed"
        " 40958). A run that began before the cut run (Gateway times, strictly) leaves the cut held"
    ),
    "crash-stream-continued-elsewhere": (
        "two deploys, a crash cut a run before it stored anything; the deploy that never saw it stream finished its"
        " message with the boot's recovery alone, and the deploy that streamed it, back second, found the message"
        " finished and dropped what its tabs had shown ([streamed], fuzz seeds 40164, 40632, 40958; about 5 in 200"
        " fresh seeds under load). It now puts what it showed in front of the recovery's part, in one conditional"
        " write (ChatStore.add_shown, render.never_less.shown_in_front; issue 24, item 5)"
    ),
    "joined-stream-finished-elsewhere": (
        "two deploys: one joined a cron run after its tool call (the other had a gap there) and streamed its text; a"
        " crash cut it (the transcript ends at the call). The deploy that missed the text finished the message with"
        " the boot's recovery first; the joiner, back second, found it finished, and shown_in_front judged its"
        " stream ([text]) as a whole run's against the transcript's [call, result]: they parted at once and the"
        " transcript won ([streamed], fuzz seeds 211298, 150408; about half the plays). A stream with a gap or"
        " joined mid-run is now lined up at the transcript's end there too (shown_in_front's missed)"
    ),
    "recovered-apart-hang": (
        "two deploys, one missing the cut run's events: the other held its message open for the Gateway's recovery,"
        " which the first had given a message of its own (it knew of no cut); nothing continued the cut and that"
        " process never went quiet (issue 24 item 12's class, fresh sweep seed 50216, 2 plays in 5). Fixed with"
        " recovered-elsewhere-hang's: a pass that reads the recovery's finished message ends the held one"
    ),
    "streamed-tail-killed": (
        "the oracle's: a message that showed exactly what its cut run streamed past the transcript was a [content]"
        " fault when the process it streamed to was killed later (fuzz seed 40536), although that process had"
        " written the message open with it before it died. What a message may show counts every process's stream;"
        " what it must show only the living ones'"
    ),
    "recovered-elsewhere-hang": (
        "two deploys, a crash cut a run that had no message yet: the deploy back first gave the boot's recovery a"
        " message of its own, the other held the cut run's message open for that recovery, which never claims"
        " there: done:false for ever, the play hung (fuzz seed 40434, about 1 play in 2). A reconcile pass that reads"
        " the recovery's finished message ends the held one (issue 24, item 14)"
    ),
    "crash-cut-order": (
        "a run a Gateway crash cut before it stored anything, which one owc process streamed but never claimed, was"
        " finished from that stream after another process had written the boot's recovery run, below it (fuzzer,"
        " seed 810, some plays). Issue 14's owner rule and link rule E now write the recovery into the cut run's"
        " message: none in seeds 0..2,999"
    ),
    "order-unreadable": (
        "while chat.history failed, a pass could not learn which runs ended while owc was away and let the chat's"
        " live claims go on (a failing read must not hold a live reply back); a run found once the transcript"
        " answered again was chained below the live one (issue 11: a run a pass finds goes above the tail's messages"
        " of its session's later runs, by the transcript's order)"
    ),
    "check-not-retried": (
        "a run that ended showing nothing live, whose transcript had to decide, was given up when chat.history"
        ' failed: a failed read was taken for "nothing shown" (issue 11, fuzzer seed 15165: the check now reads'
        " again at the Gateway's next tick, holding no later run of the chat up meanwhile)"
    ),
    "history-fallback-gaps": (
        "while chat.history failed, a message whose writer missed part of its run (events dropped, a deploy that"
        " joined mid-run or took a dead one's message over) was finished from the stream without the missed text or"
        " card, and nothing corrected it once chat.history answered again (issue 11: such a message is corrected"
        " from the transcript at a later tick, owc/runs/correct.py; and a call id a run reuses gets a card per call)"
    ),
    "order-failover": (
        "a run first known without a Gateway time (a chat event) in a new process was placed at time 0, before the"
        " runs a cut pass owed its chat (issue 11: placed at the newest Gateway time seen, then at its own first"
        " event's time)"
    ),
    "order-cut-pass": (
        "a run first seen while the hello's pass still owed its chat older runs, carried to the next connection"
        " after the pass was cut, claimed before that connection's pass gave the chat those runs (issue 11: it"
        " stays behind the pass, which places it by the transcript)"
    ),
    "order-unsettled": (
        "a pass that let a chat go because chat.history failed counted it as settled: a run first seen there"
        " afterwards, carried to the next connection, claimed before that connection's pass (issue 11)"
    ),
    "crash-cut-open": (
        "a run a Gateway crash cut before anything of it was stored stayed done:false when the process that"
        " streamed it died and another one saw the new boot (issue 11: no run outlives its boot; a pass finishes"
        " an unfinished message of a run its transcript window does not show)"
    ),
    "heartbeat-unseen": (
        "a heartbeat run owc did not see live (disconnected, down), found in its transcript: issue 11 hid it (a"
        " run whose first message chat.history marks turnBoundary after one hidden prompt), so one that spoke got"
        " no message; issue 24 item 6 follows the Gateway's own chat, which shows a heartbeat's reply and hides"
        " only its prompt and a bare HEARTBEAT_OK: a heartbeat that speaks has its message, seen live or not, one"
        " that only acknowledges has none (the repro's heartbeat speaks while owc is cut off)"
    ),
    "heartbeat-recovery-unlinked": (
        "issue 24 item 6's consequence: a heartbeat that spoke (a tool call) was cut by a Gateway restart while no owc"
        " process held it; the next process made its message from the transcript, and the boot's recovery got a"
        " message of its own: link rule E took the turnBoundary mark of the heartbeat's own hidden prompt, on its first"
        " message, for another hidden turn (fuzz seeds 80279, 80286). Fixed: that mark is folded in only past the"
        " message it marks"
    ),
    "link-older-recovery": (
        "a restart recovery the reconcile pass found, which began before the cut run this process held on its session"
        " (it recovered an earlier boot's cut), was linked to that held cut's message: it waited for the held run,"
        " whose claim waited for the runs between the two, which waited for the pass to give the recovery its message"
        " first; the play never finished (issue 24, fuzzer seed 20686: a recovery only links to a cut run that began"
        " before it)"
    ),
    "recovery-before-named-run": (
        "two deploys, a stop with a notice under a run of one while the other was away: the other, back first, gave"
        " the boot's recovery and a cron run admitted after the boot messages of their own; the first's hello row"
        " named the cron run (no recovery) for the cut's recovery, so its pass never found the recovery finished"
        " elsewhere and the cut run's message stayed done:false: the play hung (fuzz seed 41332, shrunk, 5 of 10"
        " plays). The recovery is the one the transcript shows right before the named run began; the cut run's"
        " message, made below both, takes the recovery's message's place when it absorbs it"
    ),
    "earlier-boot-behind-recovery": (
        "a run an earlier boot showed (ended aborted, showing nothing), carried behind a pass a crash cut short, waited"
        " for the new boot's pass to give the boot's recovery its message first: at an equal Gateway millisecond the"
        " place's tie-break put the recovery (placed by the transcript) first; the recovery waited for the cut run it"
        " links to, which waited for the carried run's claim: the play never finished (issue 24, fuzzer seed 61010:"
        " a run first seen under an earlier boot began before every run the later boot started)"
    ),
    "order-race": (
        "back-to-back runs chain out of run-start order (issue 11, seed case 9: claims in worker threads race for"
        " SQLite's lock; the lead is fixing it in owc/runs and owc/store)"
    ),
    "order-late": (
        "a run owc learns of late (it ran while owc was disconnected or down, found by the reconcile pass) is"
        " chained after a newer run owc wrote live: the chain follows write order, not run-start order (issue 11)"
    ),
    "aborted-repeat": (
        "an aborted item whose text starts with an earlier item's text is cut wrong (issue 11: settle against the"
        " real Gateway which of the finalizer and the simulator models the aborted R:assistant buffer)"
    ),
    "sentinel-prefix": (
        'a short answer that is only a prefix of a silent sentinel ("NO", "ANNOUNCE") is never shown, even'
        " after the run's end (issue 11)"
    ),
    "lost-at-hello": (
        "a run first seen on a new connection through an event that arrives before the hello's list is applied is"
        " not marked missed, so its terminal abandons it as one that showed nothing (lifecycle OPEN + Terminal),"
        " without reading the transcript that holds what it showed before; the reconcile pass then skips it as"
        " settled: no message (issue 11, found by the fuzzer: seed 9 and others, timing-dependent)"
    ),
    "reconcile-not-retried": (
        "a hello's reconcile pass that fails on chat.history (UNAVAILABLE) is not retried on that connection once"
        " the Gateway heals: runs that ended while owc was down get no message (and a dead process's open"
        " messages stay done:false) until some later reconnect (issue 11, found by the fuzzer: seed 5353)"
    ),
    "sentinel-in-joined-text": (
        "owc joined an announce at its end (NO_REPLY, a tool call, NO); its run-wide text 'NO_REPLY\\n\\nNO' read"
        " against the transcript's 'NO' took the sentinel for that text gone on, and the message showed"
        " ['NO', '_REPLY', 'NO'] (fuzz seed 322656)"
    ),
    "error-missed-corrected": (
        "a run ended with an error while owc was away, a later run took the session row, and chat.history failed at its"
        " finalize: the message was finished from the stream and marked for correction, and the correction, reading"
        " the transcript once it answered, left the transcript's error record out (fuzz seed 428467, about 5 plays in"
        " 6). A correction of a run whose end owc missed shows the transcript's error as a live one shows"
    ),
    "named-earlier-linked-to-held": (
        "a crash cut a sent run while no owc was up and the boot recovered it; an announce ran, owc2 came, a second"
        " crash cut the announce, which owc2 held. Its pass read the first recovery, which the transcript names as the"
        " sent run's, and linked it into the announce's message: the two runs' Gateway times fell in one millisecond,"
        " so nothing said the recovery began before the held run (fuzz seed 399767, about 3 plays in 4). A named"
        " source that began before the held cut's run on the transcript is an earlier boot's cut"
    ),
    "earlier-run-end-lost": (
        "a speaking heartbeat's end was lost in a drop and a cron run queued behind it started: it claimed at once,"
        " while owc still held the heartbeat for running, and the heartbeat's message went after it; a crash left no"
        " transcript of the cron run to put them back in start order (fuzz seed 375143). A run of the same session"
        " that began earlier and has not ended here holds a later run's claim up: its end is on its way"
    ),
    "unplaced-run-held-by-pass": (
        "the next owc's events came before its subscribe's reply: it heard a cron run that said only NO_REPLY (nothing"
        " of it in the transcript) and the next run end, and a heartbeat ended unheard, so the hello's pass owed it."
        " The pass let the run its transcript placed claim before the heartbeat, but the silent run, placed by its own"
        " Gateway time before that run, waited for the whole pass; the placed run waited for it, the heartbeat for the"
        " placed run, the pass for the heartbeat: a circle, the play hung (fuzz seed 333762, about 1 play in 6). A run"
        " with a Gateway time of its own goes by that place against the pass's next run, as a placed one does"
    ),
    "gap-pass-cut": (
        "a slow connection lost every event of a speaking heartbeat; the connection closed while the gap's pass was"
        " under way, and the close moved the next pass's watermark to its last event, past the heartbeat's end: the"
        " next hello's pass never looked at it (fuzz seed 320774)"
    ),
    "gap-pass-failed": (
        "a slow connection lost every event of a speaking heartbeat; the gap's pass met a failing chat.history and"
        " fell short, and nothing ran it again (the hello's pass goes again at each tick, a gap's did not): no"
        " message, and the runtime called itself settled (fuzz seed 320809)"
    ),
    "heartbeat-end-in-gap": (
        "a gap showed, a speaking heartbeat's start reached owc before the gap's list answered, and every later event"
        " of the heartbeat was dropped: the list ended it (absent), and nothing had marked its stream as incomplete"
        " (it was not running when the gap showed), so it was abandoned without its message (fuzz seed 302660)"
    ),
    "heartbeat-lost-in-gap": (
        "a speaking heartbeat whose every droppable event (its sessions.changed start and end, all a"
        " sessions.subscribe connection gets of it) a slow connection lost started and ended inside the seq gap:"
        " the gap's list showed it neither active nor ended, so it got no message on that connection (issue 24"
        " item 6, found by the fuzzer: seed 100552); a gap's resync now runs the ended-while-away pass from the"
        " last event before the gap"
    ),
}
#: Kinds of problem, the most serious first: a shrink keeps the most serious one the schedule shows.
SEVERITY = (
    "crash",
    "hang",
    "missing",
    "unfinished",
    "duplicate",
    "content",
    "silent",
    "tree",
    "mirror",
    "expected",
    "order",
)

#: Faults after which owc learns of a run late (from a list and the transcript, not live events).
AWAY = {
    "kill",
    "restart-restart",
    "restart-stop",
    "restart-container",
    "restart-crash",
    "slow",
    "away",
    "drop",
    "history-fails",
}


@asynccontextmanager
async def virtual_time(clock: trio.testing.MockClock, *, cushion: float = 0.005) -> AsyncIterator[None]:
    """Drive ``clock`` (a ``MockClock`` without autojump, the one this ``trio.run`` uses) for the block: jump to
    the next deadline whenever every other task has been blocked for ``cushion`` real seconds and no thread
    started with ``trio.to_thread.run_sync`` is still working.

    The clock also runs at the real rate (``rate = 1``), so the simulated Gateway's clock (Trio's time) never
    falls behind this host's, which stamps the database: a clock that stood still while real time passed made
    the Gateway's clock lag the database's by a play's real duration, and the reconcile pass's watermark (the
    database's time) then hid runs that ended while owc was away (a real fault with a Gateway whose clock is
    behind: reported, not this harness's to decide)."""
    clock.autojump_threshold = math.inf
    clock.rate = 1.0
    original = trio.to_thread.run_sync
    busy = [0]
    done = [trio.Event()]

    async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        busy[0] += 1
        try:
            return await original(*args, **kwargs)
        finally:
            busy[0] -= 1
            if busy[0] == 0:
                done[0].set()

    async def drive() -> None:
        while True:
            await trio.testing.wait_all_tasks_blocked(cushion)
            if busy[0]:
                done[0] = trio.Event()
                await done[0].wait()  # a thread's work takes real time: the clock waits for it
                continue
            wait = trio.lowlevel.current_statistics().seconds_to_next_deadline
            if math.isinf(wait):  # nothing timed is pending: only a socket can wake anyone (real time passes)
                await original(time.sleep, cushion)
            elif wait > 0:
                clock.jump(wait)
            else:
                await trio.lowlevel.checkpoint()

    trio.to_thread.run_sync = counted  # type: ignore[assignment]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drive)
            yield
            nursery.cancel_scope.cancel()
    finally:
        trio.to_thread.run_sync = original  # type: ignore[assignment]


async def judge(schedule: Schedule, db: Path) -> list[str]:
    """Play ``schedule`` into the SQLite file ``db`` and return every violation (empty: it passed)."""
    url = f"sqlite:///{db}"
    at = ["the start"]

    def progress(line: str) -> None:
        at[0] = line

    try:
        with trio.fail_after(PLAY_BOUND_S):
            played = await play_scenario(schedule.text(), url, progress=progress)
    except trio.TooSlowError:
        return [hung(at[0])]
    except Exception as exc:  # a crash of the play is a finding like any other
        return [f"[crash] play failed: {type(exc).__name__}: {str(exc)[:300]}"]
    player = played.player
    names = {spec.chat_id: name for name, spec in player.chats.items()}
    problems = check_database(player.sim, url, names)
    chats = {name: (spec.chat_id, spec.session_key, played.chats[name]) for name, spec in player.chats.items()}
    problems += check_expected(schedule.expect, schedule.order, player.sim, player.run_ids, chats)
    return [name_runs(p, player.run_ids) for p in problems]


def hung(where: str) -> str:
    """The problem line of a play that never settled: a wait that can never end is a failure of its own (issue
    24), found on Trio's virtual clock (``virtual_time`` jumps to the bound once everything is blocked), so a
    hang costs seconds, not the bound. ``where``: the op the play was in (the one after the last is owc's final
    settle)."""
    return f"[hang] the play hung: it did not settle within {PLAY_BOUND_S} s of Trio's virtual clock, in {where}"


def name_runs(problem: str, run_ids: dict[str, str]) -> str:
    """The problem with each run id (whole, or its first 8 characters) followed by the schedule's name for it."""
    for name, run_id in run_ids.items():
        problem = re.sub(rf"\b{run_id[:8]}(?:{run_id[8:]})?\b", lambda m, n=name: f"{m[0]} ({n})", problem)
    return problem


def known_bug(schedule: Schedule, problems: list[str]) -> str | None:
    """The known bug that explains every problem, if one does (``KNOWN_BUGS``' key)."""
    found = set()
    away = bool(schedule.features & AWAY)
    lost = ("reconcile-not-retried" if "history-fails" in schedule.features else "lost-at-hello") if away else None
    # A recovery with a message of its own (``[recovery]``) and its cut run's message: two messages where the design
    # has one, so their order is part of that defect, not another one (fuzz seed 40434: the cut run's message, made
    # by the process back second, lands below the recovery's own). Fixed (FIXED_BUGS): either is a failure again.
    unlinked = {
        frozenset(pair)
        for problem in problems
        for pair in re.findall(r"recovery (\w{8})[\w-]* of cut run (\w{8})", problem)
    }
    for problem in problems:
        kind = kind_of(problem)
        if kind == "order" and frozenset(re.findall(r"\brun (\w{8}) ", problem)) in unlinked:
            found.add("recovery-unlinked")
            continue
        runs = set(re.findall(r"\((r\d+)\)", problem)) | set(re.findall(r"\brun (r\d+)\b", problem))
        if kind == "recovery" and runs and runs <= schedule.heartbeats:
            found.add("heartbeat-recovery-unlinked")  # the cut source is a heartbeat that spoke (item 6)
            continue
        issue24 = {"error": "error-unseen", "cutoff": "cutoff-uncut", "recovery": "recovery-unlinked"}
        if kind in issue24:
            found.add(issue24[kind])
            continue
        if kind == "streamed":
            found.add("teardown-done" if runs and runs <= schedule.pipes else "streamed-lost")
            continue
        if kind in ("content", "missing", "expected", "unfinished") and runs and runs <= schedule.pipes:
            if "owui-teardown" in schedule.features:
                found.add("teardown-done")
                continue
        if kind == "order" and not runs:  # the summary line: "runs chained as ['r6', 'r2'], started as [...]"
            chained = re.search(r"chained as \[([^\]]*)\]", problem)
            runs = set(re.findall(r"'(r\d+)'", chained.group(1))) if chained else set()
        if kind == "order" and "restart-crash" in schedule.features and re.search(r"run \w{8} \(started", problem):
            found.add("crash-cut-order")  # an unnamed run (the boot's recovery) is in the misordered pair
        elif kind == "order":
            found.add("order-failover" if schedule.features & AWAY else "order-race")
        elif kind in ("silent", "expected", "missing") and runs and runs <= schedule.heartbeats:
            found.add("heartbeat-unseen")  # a heartbeat's message owed or not owed as the Gateway shows it
        elif kind == "content" and runs and runs <= schedule.aborted_repeats:
            found.add("aborted-repeat")
        elif kind == "content" and "history-fails" in schedule.features and schedule.features & AWAY:
            found.add("history-fallback-gaps")
        elif kind in ("missing", "expected", "content") and runs and runs <= schedule.prefixes:
            found.add("sentinel-prefix")
        elif kind in ("unfinished", "expected") and runs and runs <= schedule.cut and "kill" in schedule.features:
            found.add("crash-cut-open")
        elif kind in ("missing", "unfinished", "expected") and "must not show" not in problem and lost:
            found.add(lost)
        else:
            return None
    if found - set(KNOWN_BUGS):
        return None  # a fixed bug is back (or another one looks like it): a failure to look at
    return ", ".join(sorted(found)) or None


async def shrink_failure(
    schedule: Schedule,
    problems: list[str],
    folder: Path,
    *,
    budget: int = 300,
    log: Callable[[str], None] | None = None,
) -> Schedule:
    """The smallest schedule found that still fails with its most serious kind of problem (each candidate played
    once; a problem that does not always reproduce may shrink less)."""
    kind = min((kind_of(p) for p in problems), key=lambda k: SEVERITY.index(k) if k in SEVERITY else len(SEVERITY))
    steps = shrinking(schedule, budget=budget)
    count = 0
    try:
        candidate = next(steps)
        while True:
            count += 1
            db = folder / f"shrink-{count}.db"
            found = await judge(candidate, db)
            db.unlink(missing_ok=True)
            fails = any(kind_of(p) == kind for p in found)
            if fails and log is not None:
                log(f"shrink: {len(candidate.body)} ops ({count} plays)")
            candidate = steps.send(fails)
    except StopIteration as stop:
        return stop.value
