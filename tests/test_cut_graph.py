"""``docs/cuts.md`` is the diagram the cut machine's table gives today (``owc.rules.cut_graph``): a change to
``owc/rules/cut.py`` that moves an arrow fails here until the diagram is generated again."""

from __future__ import annotations

from pathlib import Path

from owc.rules.cut import FINAL, CutState
from owc.rules.cut_graph import edges, mermaid

DIAGRAM = Path(__file__).resolve().parents[1] / "docs" / "cuts.md"


def test_the_committed_diagram_is_the_one_the_table_gives() -> None:
    assert DIAGRAM.read_text() == mermaid(), "run: python3 -m owc.rules.cut_graph > docs/cuts.md"


def test_every_state_is_reached_and_every_unfinished_state_can_be_left() -> None:
    found = edges()
    reached = {dst for _, dst in found} | {CutState.CUT}
    left = {src for src, _ in found}
    assert reached == set(CutState)
    assert left == (set(CutState) - FINAL) | {CutState.CONTINUED_ELSEWHERE, CutState.LINKED}
    # A final cut moves again only to end M with a late send's own note (budget spent, refused).
    assert {dst for src, dst in found if src in FINAL} == {CutState.ENDED}
