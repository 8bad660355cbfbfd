"""``docs/lifecycle.md`` is the diagram the transition table gives today (``owc.rules.lifecycle_graph``): a change
to ``owc/rules/lifecycle.py`` that moves an arrow fails here until the diagram is generated again."""

from __future__ import annotations

from pathlib import Path

from owc.rules.lifecycle import State
from owc.rules.lifecycle_graph import edges, mermaid

DIAGRAM = Path(__file__).resolve().parents[1] / "docs" / "lifecycle.md"


def test_the_committed_diagram_is_the_one_the_table_gives() -> None:
    assert DIAGRAM.read_text() == mermaid(), "run: python3 -m owc.rules.lifecycle_graph > docs/lifecycle.md"


def test_every_state_is_reached_and_every_unsettled_state_can_be_left() -> None:
    found = edges()
    reached = {dst for _, dst in found} | {State.OPEN}
    left = {src for src, _ in found}
    assert reached == set(State)
    assert left == set(State) - {State.DONE, State.ABANDONED}
    # A settled run never moves again.
    assert not any(src in (State.DONE, State.ABANDONED) for src, _ in found)
