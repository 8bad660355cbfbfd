"""The seam of a continued reply (``owc/render/seam.py``, issue 25 item 3): one line where a continuation's part
begins, the same in every process, never twice, and kept by every write that rebuilds the message (a re-finalize, a
correction from the transcript, a part put in front by another process, a recovery's own message absorbed)."""

from __future__ import annotations

from typing import Any

from owc.render import output_text
from owc.render.never_less import gained_since_claim, shown_in_front
from owc.render.seam import (
    RECOVERED,
    RESUMED,
    SEAM_TEXTS,
    is_seam,
    joined,
    parts_joined,
    seam_item,
    with_live_seam,
    words,
)
from owc.store import ChatStore, Written, make_engine

RESUME = "msg-7d0c4a52-3c1e-4c55-9a51-0c2b8f1e6a10-0b6b2cb0-6d59-5d2b-9d1e-2f7c7e0c1a11-resume-1"
RECOVERY = "5f1d2c3b-0000-4000-8000-000000000001"


def msg(text: str, item_id: str | None = None) -> dict[str, Any]:
    return {"type": "message", "id": item_id or f"msg_{text}", "content": [{"type": "output_text", "text": text}]}


def card(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "id": call_id, "call_id": call_id, "name": "exec", "arguments": "{}"}


def texts(output: list[Any]) -> list[str]:
    return [output_text([item]) or item["type"] for item in output]


def test_the_seam_says_who_continued_and_is_the_same_item_everywhere() -> None:
    assert words(RECOVERY) == RECOVERED and words(RESUME) == RESUMED
    assert seam_item(RECOVERY) == seam_item(RECOVERY) and seam_item(RECOVERY)["id"] != seam_item(RESUME)["id"]
    assert output_text([seam_item(RECOVERY)]) == SEAM_TEXTS[RECOVERED] == "*↻ Resumed after the Gateway restarted*"
    assert output_text([seam_item(RESUME)]) == "*↻ Resumed by owc after the Gateway stopped*"
    assert is_seam(seam_item(RESUME)) and not is_seam(msg("Resumed after the Gateway restarted"))
    assert "\n\n" not in SEAM_TEXTS[RECOVERED]  # one piece of the run-wide buffer's split, never two


def test_a_seam_only_between_two_parts_that_show_something() -> None:
    before, own = [msg("Working.")], [msg("Picked up.")]
    out, own_at = joined(before, RECOVERY, own)
    assert texts(out) == ["Working.", SEAM_TEXTS[RECOVERED], "Picked up."] and own_at == 1 and is_seam(out[own_at])
    assert joined([], RECOVERY, own) == (own, 0), "nothing before it: nothing was continued in M"
    assert joined(before, RECOVERY, []) == (before, 1), "a continuation that showed nothing leaves no line"
    chain = parts_joined([("S", [card("c1")]), (RECOVERY, []), (RESUME, [msg("Done.")])])
    assert texts(chain) == ["function_call", SEAM_TEXTS[RESUMED], "Done."]
    assert with_live_seam(before, RECOVERY, ("S",)) == [*before, seam_item(RECOVERY)]
    assert with_live_seam(before, RECOVERY, ()) is before and with_live_seam(None, RECOVERY, ("S",)) is None


def test_a_part_put_in_front_of_a_continuation_finished_without_one_gets_its_seam_once() -> None:
    """Another process finished M with the recovery's part alone (it never saw the cut run's stream, which the crash
    kept out of the transcript): what this process showed goes in front, with the seam; a second pass adds nothing."""
    finished = [msg("Picked up.")]
    added = shown_in_front(["S", RECOVERY], 0, finished, {"S": [msg("Working.")]})
    assert added is not None
    output, own_at = added
    assert texts(output) == ["Working.", SEAM_TEXTS[RECOVERED], "Picked up."] and own_at == 1
    assert shown_in_front(["S", RECOVERY], own_at, output, {"S": [msg("Working.")]}) is None
    # A finish that had its seam keeps that one.
    seamed, at = joined([card("c1")], RECOVERY, finished)
    again = shown_in_front(["S", RECOVERY], at, seamed, {"S": [card("c1"), msg("Tail.")]})
    assert again is not None and texts(again[0]).count(SEAM_TEXTS[RECOVERED]) == 1
    assert texts(again[0]) == ["function_call", "Tail.", SEAM_TEXTS[RECOVERED], "Picked up."]


def test_what_m_gained_since_the_claim_goes_in_front_with_the_seam() -> None:
    output, own_at = joined([], RECOVERY, [msg("Picked up.")])  # claimed when M showed nothing
    gained = gained_since_claim([msg("Working.")], output, own_at, RECOVERY)
    assert gained is not None and texts(gained[0]) == ["Working.", SEAM_TEXTS[RECOVERED], "Picked up."]


def _store(tmp_path: Any) -> ChatStore:
    store = ChatStore(make_engine(f"sqlite:///{tmp_path / 'webui.db'}"))
    store.create_tables()
    store.create_chat("c", "u")
    return store


def test_a_correction_of_a_continuation_keeps_the_earlier_part_and_one_seam(tmp_path) -> None:
    """``owc/runs/correct.py`` writes a run's own part from its transcript (``own_part``): a chain's earlier runs and
    the seam stay in front, once, however often it is corrected."""
    store = _store(tmp_path)
    store.claim("c", "m1", run_id="S", writer="w", alive=lambda w: False, user_id="u")
    streamed, own_at = joined([msg("Working.")], RECOVERY, [msg("Picked")])
    meta = {"openclaw_chain": ["S", RECOVERY], "openclaw_own_at": own_at, "openclaw_correct": True}
    store.write("c", "m1", content="", output=streamed, done=True, meta=meta)
    for _ in range(2):
        result = store.write(
            "c", "m1", content="", output=[msg("Picked up."), card("c2")], done=True, own_part=RECOVERY, fills=True
        )
        assert isinstance(result, Written)
    final = store.read_chat("c")["history"]["messages"]["m1"]
    assert texts(final["output"]) == ["Working.", SEAM_TEXTS[RECOVERED], "Picked up.", "function_call"]
    assert final["meta"]["openclaw_own_at"] == 1 and "openclaw_correct" not in final["meta"]
    # A message of one run is corrected whole, as before.
    store.claim("c", "m2", run_id="R", writer="w", alive=lambda w: False, user_id="u")
    store.write("c", "m2", content="", output=[msg("Half")], done=True)
    store.write("c", "m2", content="", output=[msg("Whole.")], done=True, own_part="R")
    assert texts(store.read_chat("c")["history"]["messages"]["m2"]["output"]) == ["Whole."]


def test_a_continuation_claiming_m_that_already_holds_its_part_shows_only_what_came_before() -> None:
    """Fuzz seed 153: another process's copy of the same recovery finished M (the cut run's part, the seam, the
    recovery's part); this process's copy claims M and reads its prefix there. The prefix is M before the recovery's
    own part (``openclaw_own_at``), else its finalize put that part, and its seam, in twice."""
    from types import SimpleNamespace

    from owc.runs.writer import _Writer

    output, own_at = joined([msg("Done.")], RECOVERY, [msg("Recovered.")])
    held = {"output": output, "meta": {"openclaw_chain": ["S", RECOVERY], "openclaw_own_at": own_at}}
    writer = _Writer(None, SimpleNamespace(run_id=RECOVERY), None)  # type: ignore[arg-type]
    assert texts(writer._before_own(held)) == ["Done."]
    rebuilt, _ = joined(writer._before_own(held), RECOVERY, [msg("Recovered.")])
    assert rebuilt == output, "its finish rebuilds M as it is: no part, no seam twice"
    other = _Writer(None, SimpleNamespace(run_id="R2"), None)  # type: ignore[arg-type]
    assert other._before_own(held) == output, "a later continuation shows all of M before its own part"
