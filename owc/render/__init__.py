"""Rendering runs as Open WebUI messages: live (``TurnRenderer`` + ``diff``) and finished (``transcript``). Pure."""

from owc.render.diff import Diff, Flush, Shown, apply_events, diff, diff_at, snapshot_event
from owc.render.items import count_cards, output_text
from owc.render.sentinels import SILENT_SENTINELS, is_silent, may_become_silent
from owc.render.transcript import (
    FinishedRun,
    finish,
    output_from_transcript,
    reaches_run_start,
    run_error,
    run_messages,
    shows_in_transcript,
    transcript_error,
)
from owc.render.turn import TurnRenderer

__all__ = [
    "SILENT_SENTINELS",
    "Diff",
    "FinishedRun",
    "Flush",
    "Shown",
    "TurnRenderer",
    "apply_events",
    "count_cards",
    "diff",
    "diff_at",
    "finish",
    "is_silent",
    "may_become_silent",
    "output_from_transcript",
    "output_text",
    "reaches_run_start",
    "run_error",
    "run_messages",
    "shows_in_transcript",
    "snapshot_event",
    "transcript_error",
]
