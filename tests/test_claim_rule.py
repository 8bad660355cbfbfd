"""Claim order as a pure rule (``owc.rules.claim``, issue 26 item 2): its table cell by cell, and what it
guarantees over every combination of facts (a wait only for something that comes; no run waits on a pass it feeds)."""

from __future__ import annotations

import itertools

import attrs
import pytest

from owc.rules.claim import Claimer, ClaimFacts, Turn, claim_turn, holds_up

FLAGS = [f.name for f in attrs.fields(ClaimFacts)]

#: The rule's table. Each row: the facts that hold (all others false), then the turn. ``claiming`` is named where it
#: holds. Read a row as "a run that ... waits for / goes".
TABLE = """
-                                                       GO              past its claim: nothing to order
claiming                                                AWAIT_HELLO     first seen here, before the hello's list
claiming hello                                          GO              first seen here, no pass due in its chat
claiming hello earlier                                  AWAIT_EARLIER   an earlier run of the chat claims first
claiming hello pass_due                                 AWAIT_PASS      the pass has not placed it (seed 5648)
claiming hello pass_due placed                          AWAIT_PASS      placed, but the pass owes an earlier run
claiming hello pass_due before_owed                     AWAIT_PASS      a stand-in place: the pass goes first
claiming hello pass_due placed before_owed              GO              placed, nothing earlier owed (seed 333762)
claiming hello pass_due placed before_owed earlier      AWAIT_EARLIER   and then only earlier claimers hold it
claiming awaited                                        GO              a recovery waits for its message: first
claiming awaited pass_due                               GO              whatever the pass owes (seeds 81, 161)
claiming awaited earlier                                AWAIT_EARLIER   but after earlier claiming runs
claiming reconciled                                     GO              the pass gave it its message
claiming reconciled pass_due                            GO              the pass does not wait for itself
claiming reconciled earlier                             AWAIT_EARLIER   an earlier reconciled run first
claiming carried                                        GO              carried, its connection's pass was whole
claiming carried pass_due                               GO              carried runs never wait for a new pass
claiming carried behind_pass                            AWAIT_HELLO     behind a pass cut short: the hello first
claiming carried behind_pass hello                      AWAIT_PASS      the pass may owe a run that began earlier
claiming carried behind_pass hello before_owed          GO              nothing earlier owed: it goes
claiming carried behind_pass hello before_owed earlier  AWAIT_EARLIER   after earlier claimers
claiming reconciled behind_pass                         GO              reconciled: its place is the transcript's
"""


def _rows() -> list[tuple[ClaimFacts, Turn, str]]:
    rows = []
    for line in TABLE.strip().splitlines():
        words = line.split()
        at = next(i for i, w in enumerate(words) if w in Turn.__members__)
        names = [w for w in words[:at] if w != "-"]
        assert set(names) <= set(FLAGS), names
        facts = {name: name in names for name in FLAGS}
        rows.append((ClaimFacts(**facts), Turn[words[at]], " ".join(words[at + 1 :])))
    return rows


@pytest.mark.parametrize(("facts", "turn", "why"), _rows(), ids=[why for _, _, why in _rows()])
def test_cell(facts: ClaimFacts, turn: Turn, why: str) -> None:
    assert claim_turn(facts) is turn


def _every() -> list[ClaimFacts]:
    return [
        ClaimFacts(**dict(zip(FLAGS, values, strict=True))) for values in itertools.product((False, True), repeat=10)
    ]


def test_a_run_past_its_claim_is_never_held() -> None:
    assert all(claim_turn(f) is Turn.GO for f in _every() if not f.claiming)


def test_an_earlier_claiming_run_always_goes_first() -> None:
    assert all(claim_turn(f) is not Turn.GO for f in _every() if f.claiming and f.earlier)


def test_once_every_fact_it_waits_for_has_come_it_goes() -> None:
    """Every wait ends on an input that comes: the hello's list, the pass's placing and progress (``before_owed``,
    ``placed``, or the pass done with the chat: ``pass_due`` false), an earlier claim. No clock."""
    for f in _every():
        done = attrs.evolve(f, hello=True, pass_due=False, before_owed=True, placed=True, earlier=False)
        assert claim_turn(done) is Turn.GO, f


def test_progress_never_makes_a_run_wait_longer() -> None:
    """Each fact moves one way as the connection goes on (the hello comes, the pass places runs and lets chats go,
    earlier claims finish): none of those steps turns a run that may claim into one that waits."""
    steps = [("hello", True), ("pass_due", False), ("before_owed", True), ("placed", True), ("earlier", False)]
    for f in _every():
        if claim_turn(f) is Turn.GO:
            for name, value in steps:
                assert claim_turn(attrs.evolve(f, **{name: value})) is Turn.GO, (f, name)


def test_runs_the_pass_feeds_never_wait_for_it() -> None:
    """No circle with the pass: a run it gave a message (reconciled), a recovery's awaited cut run, and a carried run
    whose connection's pass was whole never wait for this connection's pass or hello."""
    for f in _every():
        if f.claiming and (f.reconciled or f.awaited or (f.carried and not f.behind_pass)):
            assert claim_turn(f) in (Turn.GO, Turn.AWAIT_EARLIER), f


# ------------------------------------------------------------------------------------------- who holds whom up


def test_holds_up() -> None:
    run = Claimer(place=(10, 1, 5))
    earlier = Claimer(place=(9, 1, 4))
    assert holds_up(earlier, run)
    assert not holds_up(run, earlier)  # a later run never holds an earlier one
    assert not holds_up(attrs.evolve(earlier, on_its_way=False), run)  # no live writer on its way: nobody held
    assert not holds_up(attrs.evolve(earlier, check_waits=True), run)  # waits for a tick: it could wait on ``run``
    assert not holds_up(attrs.evolve(earlier, linking=True), run)  # waits on its cut run, not on claims
    reconciled = attrs.evolve(run, reconciled=True)
    assert not holds_up(earlier, reconciled)  # first seen on this connection: it began after a reconciled run ended
    assert holds_up(attrs.evolve(earlier, reconciled=True), reconciled)
    assert holds_up(attrs.evolve(earlier, carried=True), reconciled)
    assert holds_up(attrs.evolve(earlier, by_transcript=True), reconciled)
    assert not holds_up(attrs.evolve(earlier, place=run.place), run)  # the same place: strictly earlier only


def test_an_earlier_run_of_the_session_not_ended_here_holds_a_later_one_up() -> None:
    """Fuzz seed 375143: one session runs one run at a time, so an earlier run still open here has ended, and its end
    is on its way (lost in a gap, or reordered): it claims (or shows nothing) in its place first."""
    run = Claimer(place=(10, 1, 5), session_key="k")
    open_earlier = Claimer(place=(9, 1, 4), session_key="k", running=True, on_its_way=False)
    assert holds_up(open_earlier, run)
    assert not holds_up(attrs.evolve(open_earlier, session_key="other"), run)  # another session of the chat
    assert not holds_up(attrs.evolve(open_earlier, place=(11, 1, 6)), run)  # it began later
    assert not holds_up(attrs.evolve(open_earlier, running=False), run)  # ended (or holds a message): no hold
    assert not holds_up(run, attrs.evolve(open_earlier, running=False))  # and never the other way round
