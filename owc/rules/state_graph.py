"""A state machine's diagram as Markdown with a Mermaid block, drawn from its transition edges. Pure.

Shared by the run lifecycle's diagram (``lifecycle_graph.py``) and the cut machine's (``cut_graph.py``): each finds
its edges from its own table; how an edge is drawn is one thing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence


def mermaid_markdown(
    header: Sequence[str],
    order: Sequence[enum.Enum],
    start: enum.Enum,
    edges: Mapping[tuple[enum.Enum, enum.Enum], Iterable[str]],
    finals: Iterable[enum.Enum],
) -> str:
    """``header`` lines, then a ``stateDiagram-v2`` block: the start, every edge labelled with its inputs (in the
    states' order), and the final states."""
    lines = [*header, "", "```mermaid", "stateDiagram-v2", f"    [*] --> {start.name}"]
    for (src, dst), labels in sorted(edges.items(), key=lambda e: (order.index(e[0][0]), order.index(e[0][1]))):
        lines.append(f"    {src.name} --> {dst.name}: {', '.join(sorted(labels))}")
    lines += [f"    {state.name} --> [*]" for state in finals]
    lines += ["```", ""]
    return "\n".join(lines)
