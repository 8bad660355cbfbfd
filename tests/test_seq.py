"""The per-connection seq tracker."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from owc.protocol import SeqStatus, SeqTracker


def feed_all(seqs: list[int | None]) -> list[SeqStatus]:
    tracker = SeqTracker()
    return [tracker.feed(s).status for s in seqs]


def test_in_order() -> None:
    assert feed_all([1, 2, 3, 4]) == [SeqStatus.IN_ORDER] * 4


def test_gap_of_one() -> None:
    tracker = SeqTracker()
    tracker.feed(1)
    tracker.feed(2)
    result = tracker.feed(4)
    assert result.is_gap and result.expected == 3 and result.received == 4 and result.missed == 1
    assert tracker.feed(5).status is SeqStatus.IN_ORDER


def test_gap_of_many() -> None:
    tracker = SeqTracker()
    tracker.feed(1)
    result = tracker.feed(50)
    assert result.is_gap and result.missed == 48
    assert tracker.feed(51).status is SeqStatus.IN_ORDER


def test_first_event_after_drops_is_a_gap() -> None:
    # A connection's count starts at 1: a first event numbered 3 means two were dropped.
    result = SeqTracker().feed(3)
    assert result.is_gap and result.missed == 2


def test_duplicate_and_old_are_gaps_and_rebase() -> None:
    """The Gateway never repeats or rewinds its count: either means the count can no longer vouch for the
    stream, so it is a gap (a resync), and the tracker re-bases on the new number."""
    tracker = SeqTracker()
    for s in (1, 2, 3):
        tracker.feed(s)
    result = tracker.feed(3)
    assert result.status is SeqStatus.REWOUND and result.is_gap and result.missed == 0
    assert tracker.feed(1).is_gap
    assert tracker.last == 1
    assert tracker.feed(2).status is SeqStatus.IN_ORDER


def test_an_absurd_seq_does_not_blind_gap_detection() -> None:
    """Before, a seq of 2^63-1 became ``last`` and every later number was "stale": no gap was ever seen
    again on that connection (issue 11)."""
    tracker = SeqTracker()
    tracker.feed(1)
    absurd = tracker.feed(2**63 - 1)
    assert absurd.is_gap and absurd.absurd
    back = tracker.feed(2)
    assert back.is_gap and not back.absurd  # the count re-bases on the honest number
    assert tracker.feed(3).status is SeqStatus.IN_ORDER
    gap = tracker.feed(6)
    assert gap.is_gap and gap.missed == 2  # and the next real loss is seen
    assert not tracker.feed(7).is_gap


def test_frames_without_seq() -> None:
    tracker = SeqTracker()
    assert tracker.feed(None).status is SeqStatus.UNNUMBERED
    assert tracker.feed(1).status is SeqStatus.IN_ORDER
    assert tracker.feed(None).status is SeqStatus.UNNUMBERED
    assert tracker.feed(2).status is SeqStatus.IN_ORDER
    assert tracker.feed(None).missed == 0


def test_reset_for_a_new_connection() -> None:
    tracker = SeqTracker()
    tracker.feed(1)
    tracker.feed(2)
    tracker.reset()
    assert tracker.feed(1).status is SeqStatus.IN_ORDER


@given(st.lists(st.integers(min_value=1, max_value=10_000), unique=True).map(sorted))
def test_missed_counts_every_dropped_number(kept: list[int]) -> None:
    """Whatever subset of 1..N arrives in order, the gaps add up to exactly the numbers that did not."""
    tracker = SeqTracker()
    missed = sum(tracker.feed(s).missed for s in kept)
    assert missed == (kept[-1] - len(kept) if kept else 0)
