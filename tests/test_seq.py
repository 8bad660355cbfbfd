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


def test_duplicate_and_old_are_stale_and_do_not_rewind() -> None:
    tracker = SeqTracker()
    for s in (1, 2, 3):
        tracker.feed(s)
    assert tracker.feed(3).status is SeqStatus.STALE
    assert tracker.feed(1).status is SeqStatus.STALE
    assert tracker.last == 3
    assert tracker.feed(4).status is SeqStatus.IN_ORDER


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
