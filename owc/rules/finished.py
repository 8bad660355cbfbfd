"""When a stored message is finished. Pure.

A message owc writes is *owed* from its claim until owc writes it finished; Open WebUI may meanwhile save it
``done: true`` on its own (its middleware on a cancelled request, its ``/stop`` when no task is left), and a
process can die right after such a save, before the handover reaches owc. ``done`` alone therefore does not say
the run's reply is whole: owc marks the messages it owes, and only its own finishing write removes the mark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``meta`` key owc sets on a message while it owes the message its finish (claimed, taken over, written open) and
#: removes when it writes the message finished. Open WebUI's own saves merge the keys they write and keep ``meta``
#: as it is, so a message its middleware saved ``done: true`` on a cancel (or its ``/stop`` with no task left)
#: while owc still owed it keeps the mark: it is not finished, and the next process finishes it from the
#: transcript (issue 24, item 1: a user turn whose process died between that save and the handover).
OPEN_MARK = "openclaw_open"


def message_finished(message: Mapping[str, Any]) -> bool:
    """The message is finished: ``done: true`` and not still owed by owc (``OPEN_MARK``). A message without the mark
    (Open WebUI's own, or one finished before the mark existed) is finished when it says ``done``."""
    meta = message.get("meta")
    return message.get("done") is True and not (isinstance(meta, Mapping) and meta.get(OPEN_MARK) is True)


#: ``meta`` key of a message finished from a stream with gaps because its transcript could not be read
#: (``owc/runs/correct.py``): it lacks what the gaps held until a correction writes it from the transcript. The
#: mark outlives the process that set it: a process killed before its correction ran left the message short for
#: good (fuzz seed 212956: the tool call made while owc was down never reached the message), so a later process's
#: reconcile pass finds the marked message and corrects it. Only the write that finishes a message decides it: any
#: finishing write that does not set it again removes it (a finish from the transcript is whole).
CORRECT_MARK = "openclaw_correct"


def awaits_correction(message: Mapping[str, Any]) -> bool:
    """The message is finished, and short of its transcript until a correction reads it (``CORRECT_MARK``)."""
    meta = message.get("meta")
    return message_finished(message) and isinstance(meta, Mapping) and meta.get(CORRECT_MARK) is True
