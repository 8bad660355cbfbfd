"""The thinking level's pure rules (``owc.rules.thinking``), cell by cell, against the Gateway's measured words
(``docs/measured/usage-thinking-2026.9.6.md`` section 3)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from owc.rules import thinking as t

PLAIN = t.Ladder(("off",))
REASONING = t.Ladder(("off", "minimal", "low", "medium", "high"))
EFFORTS = t.Ladder(("off", "minimal", "low", "medium", "high", "xhigh"))
NO_OFF = t.Ladder(("medium", "high"))


@pytest.mark.parametrize(
    ("word", "level"),
    [
        ("off", "off"),
        ("None", "off"),
        ("on", "low"),
        ("ON", "low"),
        ("enabled", "low"),
        ("think-hard", "low"),
        ("min", "minimal"),
        ("think", "minimal"),
        ("med", "medium"),
        ("harder", "medium"),
        ("ultrathink", "high"),
        ("highest", "high"),
        ("x-high", "xhigh"),
        ("extra_high", "xhigh"),
        ("Extra High", "xhigh"),
        ("auto", "adaptive"),
        ("max", "max"),
        ("ultra", "ultra"),
        ("bogus", None),
        ("", None),
        ("  ", None),
        (3, None),
        (None, None),
    ],
)
def test_normalize_follows_the_gateways_synonyms(word, level) -> None:
    assert t.normalize(word) == level


# (asked, ladder, sent, note says) -- the note's words, or None for no note.
CLAMPS = [
    ("high", REASONING, "high", None),
    ("medium", EFFORTS, "medium", None),
    ("xhigh", EFFORTS, "xhigh", None),
    ("xhigh", REASONING, "high", "does not support thinking level 'xhigh', so 'high' was used"),
    ("ultra", REASONING, "high", "does not support thinking level 'ultra', so 'high' was used"),
    ("max", EFFORTS, "xhigh", "does not support thinking level 'max', so 'xhigh' was used"),
    ("adaptive", REASONING, "medium", "does not support thinking level 'adaptive', so 'medium' was used"),
    ("high", PLAIN, None, "only supports thinking level 'off', so 'high' was not sent"),
    ("minimal", PLAIN, None, "only supports thinking level 'off', so 'minimal' was not sent"),
    ("off", PLAIN, "off", None),
    ("low", NO_OFF, "medium", "does not support thinking level 'low', so 'medium' was used"),  # none below: lowest
    ("off", NO_OFF, "medium", "does not support thinking level 'off', so 'medium' was used"),
    ("high", None, "high", None),  # unknown ladder: sent as asked (a rejection is then learned)
    ("on", REASONING, "low", None),
    ("bogus", REASONING, None, "'bogus' is not a thinking level"),
    ("", REASONING, None, None),
]


@pytest.mark.parametrize(("asked", "ladder", "sent", "says"), CLAMPS)
def test_clamp_goes_down_never_up(asked, ladder, sent, says) -> None:
    got = t.clamp(asked, ladder, "p/m")
    assert got.level == sent
    if says is None:
        assert got.note is None
    else:
        assert got.note is not None and says in got.note
        assert got.note.endswith(".") and "\n" not in got.note  # one line


def test_a_note_names_the_model_and_shows_labels() -> None:
    ladder = t.Ladder(("off", "high"), {"off": "off", "high": "on"})
    assert t.clamp("ultra", ladder, "opencode/x").note == (
        "opencode/x does not support thinking level 'ultra', so 'on' was used."
    )
    assert t.clamp("ultra", PLAIN).note == "This model only supports thinking level 'off', so 'ultra' was not sent."


@pytest.mark.parametrize(
    ("row", "ids", "labels", "default"),
    [
        (None, None, None, None),
        ({"session": None}, None, None, None),
        ({}, None, None, None),
        (
            {
                "thinkingLevels": [{"id": "off", "label": "off"}, {"id": "high", "label": "on"}],
                "thinkingDefault": "high",
            },
            ("off", "high"),
            {"off": "off", "high": "on"},
            "high",
        ),
        (
            {"thinkingOptions": ["off", "minimal", "low"], "thinkingDefault": "low"},
            ("off", "minimal", "low"),
            {},
            "low",
        ),
        ({"thinkingLevels": [{"id": "bogus"}, "x"], "thinkingOptions": ["off"]}, ("off",), {}, None),
        ({"thinkingLevels": [{"id": "off"}], "thinkingDefault": "ultra"}, ("off",), {"off": "off"}, None),
    ],
)
def test_ladder_of_a_describe_row(row, ids, labels, default) -> None:
    ladder = t.ladder_of(row)
    if ids is None:
        assert ladder is None
        return
    assert ladder is not None and ladder.ids == ids and dict(ladder.labels) == labels and ladder.default == default


def test_model_of_a_row() -> None:
    assert t.model_of({"modelProvider": "fake", "model": "fake-model"}) == "fake/fake-model"
    assert t.model_of({"model": "x"}) is None and t.model_of(None) is None


# The texts as measured on 2026.9.6 (section 3.2, 3.3).
INJECTED = [
    ('Thinking level "low" is not supported for fake/fake-model. Use one of: off.', "low", "fake/fake-model", ("off",)),
    (
        'Thinking level "xhigh" is not supported for fake/fake-model. Use one of: off, minimal, low, medium, high.',
        "xhigh",
        "fake/fake-model",
        REASONING.ids,
    ),
    (
        'Thinking level "ultra" is not supported for openrouter/z-ai/glm-5.2. Use one of: off, low, on.',
        "ultra",
        "openrouter/z-ai/glm-5.2",
        ("off", "low"),  # a label that is no level's word ("on" is low's synonym: kept once)
    ),
]


@pytest.mark.parametrize(("text", "level", "model", "ids"), INJECTED)
def test_the_injected_rejection_is_read_back(text, level, model, ids) -> None:
    got = t.parse_injected(text)
    assert got is not None and (got.level, got.model, got.ladder.ids) == (level, model, ids)
    message = {"provider": "openclaw", "model": "gateway-injected", "content": [{"type": "text", "text": text}]}
    assert t.rejection_in_final(message, text) == got
    # The same words from a model are the model's answer, not the Gateway's refusal.
    assert t.rejection_in_final({"role": "assistant"}, text) is None


@pytest.mark.parametrize("text", ["Hello.", 'Thinking level "low" is fine', "", None])
def test_other_texts_are_no_rejection(text) -> None:
    assert t.parse_injected(text) is None


def test_the_patch_refusal_is_read_back() -> None:
    got = t.parse_patch_refusal(
        'thinkingLevel "xhigh" is not supported for fake/fake-model (use off|minimal|low|medium|high)'
    )
    assert got is not None and got.ladder.ids == REASONING.ids and got.level == "xhigh"
    assert t.parse_patch_refusal("invalid thinkingLevel (use off)") is None


def test_memory_says_a_note_once_per_chat_model_and_ask() -> None:
    memory = t.ThinkingMemory()
    clamped = t.clamp("ultra", REASONING, "p/m")
    assert memory.note_once("c1", "p/m", clamped) == clamped.note
    assert memory.note_once("c1", "p/m", clamped) is None
    assert memory.note_once("c2", "p/m", clamped) == clamped.note
    assert memory.note_once("c1", "p/other", clamped) == clamped.note
    assert memory.note_once("c1", "p/m", t.clamp("high", REASONING)) is None  # nothing to say
    rejection = t.parse_injected('Thinking level "low" is not supported for a/b. Use one of: off.')
    assert rejection is not None
    memory.learn(rejection, new_session_of="main")
    assert memory.ladder("a/b") == rejection.ladder and memory.agent_models == {"main": "a/b"}
    assert memory.ladder(None) is None and memory.ladder("c/d") is None


def test_memory_is_bounded() -> None:
    memory = t.ThinkingMemory(max_noted=3)
    clamped = t.clamp("ultra", REASONING)
    for i in range(10):
        memory.note_once(f"c{i}", None, clamped)
    assert len(memory.noted) <= 3


def test_the_picker_is_the_ladder_by_rank() -> None:
    assert t.PICKER == ("off", "minimal", "low", "medium", "adaptive", "high", "xhigh", "max", "ultra")


def test_the_rules_are_pure() -> None:
    code = (
        "import sys, owc.rules.thinking; bad = [m for m in ('trio', 'anyio', 'owc.gateway', 'owc.runs', 'owc.owui')"
        " if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
