"""The intent rule (``owc/rules/intent.py``): what a cancel of a writer's Open WebUI task meant, from the tabs'
answers. A Stop anywhere stops; "Send now" or nothing keeps the message streaming; a malformed answer is none."""

from __future__ import annotations

from typing import Any

import pytest

from owc.rules.intent import BadAnswer, Intent, PageAnswer, decide, read_answer, stops


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"hook": True, "kinds": []}, PageAnswer(True, ())),
        ({"hook": True, "kinds": ["send_now", "stop"]}, PageAnswer(True, ("send_now", "stop"))),
        ({"hook": False}, PageAnswer(False, ())),
    ],
)
def test_the_hooks_answers_are_read(raw: dict[str, Any], expected: PageAnswer) -> None:
    assert read_answer(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "stop",
        ["stop"],
        {"error": "Client session disconnected."},
        {"error": "Event call timed out. The browser tab may be inactive or closed.", "hook": True},
        {"kinds": ["stop"]},  # no hook flag: not the hook's answer
        {"hook": "yes", "kinds": []},
        {"hook": True, "kinds": "stop"},
        {"hook": True, "kinds": [1]},
        {"hook": True, "kinds": ["stop", "reboot"]},  # an unknown kind spoils the whole answer
    ],
)
def test_anything_else_is_no_answer(raw: Any) -> None:
    with pytest.raises(BadAnswer):
        read_answer(raw)


def test_a_stop_anywhere_wins_and_send_now_or_nothing_keeps_writing() -> None:
    send_now = PageAnswer(True, ("send_now",))
    stop = PageAnswer(True, ("stop",))
    nothing = PageAnswer(True, ())
    hookless = PageAnswer(False, ())
    assert decide([]) is Intent.UNKNOWN
    assert decide([nothing, hookless]) is Intent.UNKNOWN
    assert decide([send_now, nothing]) is Intent.SEND_NOW
    assert decide([send_now, stop]) is Intent.STOP
    assert decide([PageAnswer(True, ("stop", "send_now"))]) is Intent.STOP
    assert stops(stop) and not stops(send_now) and not stops(hookless)
