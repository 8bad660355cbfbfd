"""``Run`` stays small (issue 26, item 2): what this process knows of a run is grouped by what it is about, and a
flag that is a state lives in the machine that owns it (the lifecycle, the status lines, the cut machine)."""

from __future__ import annotations

import attrs

from owc.runs.run import Continuation, Reading, Run, Standing, WriterSlot


def test_run_has_at_most_twelve_fields() -> None:
    names = [field.name for field in attrs.fields(Run)]
    assert len(names) <= 12, names
    assert {"writer", "standing", "read", "cont"} <= set(names)


def test_a_field_that_is_not_there_fails_loudly() -> None:
    """Slots: a caller still using a field that moved into a record raises instead of making a new attribute."""
    from owc import ids
    from owc.render import TurnRenderer

    run = Run("k", "r", ids.SessionRef(agent_id="main", user_id="u", chat_id="c"), "m", TurnRenderer("r", "k"))
    for moved in ("history", "chain", "timed", "handover"):
        try:
            setattr(run, moved, None)
        except AttributeError:
            continue
        raise AssertionError(f"Run.{moved} could be set")
    assert isinstance(run.writer, WriterSlot) and isinstance(run.standing, Standing)
    assert isinstance(run.read, Reading) and isinstance(run.cont, Continuation)
