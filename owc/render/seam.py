"""The seam of a continued reply: a short line in the message where a continuation's part begins. Pure.

A cut run's message M is continued by another run (seed 000 section 2.7): the Gateway's restart recovery, linked by
rule E, or owc's own resume (``msg-<chat>-<M>-resume-<n>``). Its text starts again under the cut run's partial, and
without a word the reader sees two answers run together (issue 25, item 3). So M's output holds, between the part of
one run and the part of the run that continues it, one message item of its own that says so: "Resumed after the
Gateway restarted" for a recovery, other words for a resume owc sent (the Gateway stopped, or its runtime was killed
from outside, and nobody else would go on).

The item is derived from the continuing run's id alone (its kind, and an item id hashed from it), so every process
and every re-finalize builds the same item at the same place: a finalize rebuilds M from the chain's parts
(``joined``), never from a stored M with the seam already in it, and the message never shows a seam twice. A seam
goes only between two parts that both show something: a continuation that showed nothing leaves no line, and a cut
run that showed nothing has no part to be continued after. The seam belongs to the continuing run's part: a
message's ``meta.openclaw_own_at`` (where the last run's part begins) points at it, so the earlier runs' part
(``output[:own_at]``), which ``never_less`` compares with what was shown of them, holds their items alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from owc import ids
from owc.render.frozen import FrozenDict
from owc.render.items import item_id, message_item

#: The seam before a Gateway restart recovery's part (link rule E).
RECOVERED = "Resumed after the Gateway restarted"
#: The seam before an owc resume's part (the owner rule gave the cut to owc: a Gateway stop, an outside kill).
RESUMED = "Resumed by owc after the Gateway stopped"
#: How each seam reads in the message (a short italic line of its own, marked as not the agent's words).
SEAM_TEXTS = {RECOVERED: f"*↻ {RECOVERED}*", RESUMED: f"*↻ {RESUMED}*"}
#: The prefix of a seam item's id (``seam_`` + 24 hex, from the continuing run's id).
PREFIX = "seam"


def resumed_by_owc(run_id: str) -> bool:
    """``run_id`` is a resume owc sent (``msg-<chat>-<M>-resume-<n>``), not the Gateway's recovery."""
    ref = ids.parse_run_id(run_id)
    return ref is not None and ref.kind == "resume"


def words(run_id: str) -> str:
    """What the seam before ``run_id``'s part says (without its markup)."""
    return RESUMED if resumed_by_owc(run_id) else RECOVERED


def seam_item(run_id: str) -> FrozenDict:
    """The seam item before continuation ``run_id``'s part: the same id and text in every process."""
    return message_item(item_id(PREFIX, run_id, "seam"), SEAM_TEXTS[words(run_id)], done=True)


def is_seam(item: Mapping[str, Any]) -> bool:
    """``item`` is a seam item (by its id: an agent's text never has one of this form)."""
    return item.get("type") == "message" and str(item.get("id") or "").startswith(f"{PREFIX}_")


def joined(before: Sequence[Mapping[str, Any]], run_id: str, own: Sequence[Mapping[str, Any]]) -> tuple[list[Any], int]:
    """A continuation's message: the earlier runs' part ``before``, the seam, then continuation ``run_id``'s own part
    ``own``. The seam only when both show something. Returns the output and where the continuation's part begins
    (``meta.openclaw_own_at``: at its seam)."""
    if before and own:
        return [*before, seam_item(run_id), *own], len(before)
    return [*before, *own], len(before)


def parts_joined(parts: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[Any]:
    """The runs of a chain, each with its part, in order, as one output: a seam before each part that follows one
    that showed something (``joined``, pairwise)."""
    out: list[Any] = []
    for run_id, part in parts:
        out, _ = joined(out, run_id, part)
    return out


def with_live_seam(
    prefix: list[dict[str, Any]] | None, run_id: str, chain: Sequence[str]
) -> list[dict[str, Any]] | None:
    """What a continuation's writer shows before its own output while it streams: the earlier runs' part and the seam
    (shown at once, so the tab says where the continuation begins before its first word; the finalize drops it again
    if the continuation shows nothing). A run that continues nothing (no chain) or nothing shown: ``prefix`` as is."""
    if not chain or not prefix:
        return prefix
    return [*prefix, seam_item(run_id)]
