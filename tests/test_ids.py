"""The identity rule (seed 000, section 2.2) and session keys."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owc import ids

CHAT = "3f0c9f2e-8a51-4b1e-9d7a-0c6f2b1e4a55"
MSG = "9b2d7e10-4c3a-4f6b-8e21-5a7c9d0e1f23"
USER = "0d8e5c1a-77b2-4e0f-a1c3-9f2e4d6b8a10"
KEY = f"agent:main:openwebui-{USER}-{CHAT}"


@pytest.mark.parametrize(
    ("run_id", "expected"),
    [
        (f"msg-{CHAT}-{MSG}-1764420000000", MSG),
        (f"msg-{CHAT}-{MSG}-input-1764420000000", MSG),
        (f"msg-{CHAT}-{MSG}-resume-1764420000000", MSG),
        (f"msg-{CHAT}-{MSG}-x", MSG),
        (f"msg-{CHAT.upper()}-{MSG.upper()}-1", MSG.upper()),
        ("owui-action-compact-abc-1", None),
        ("owui-action-", None),
    ],
)
def test_pipe_started_and_action_runs(run_id: str, expected: str | None) -> None:
    assert ids.message_id(KEY, run_id) == expected


@pytest.mark.parametrize(
    "run_id",
    [
        "e45a91a6-cb86-4bdd-8bba-fa84994aecbd",  # chat.send idempotency key from another client
        f"msg-{CHAT}-{MSG}",  # no suffix: not a pipe-started form
        f"msg-{CHAT}-{MSG}-",  # empty suffix
        f"msg-{CHAT}-notauuid-1",
        f"user-input-{CHAT}-1",  # the old pipe's forms that did not carry the reply id
        f"resume-{CHAT}-1",
        f"compact-{CHAT}-1",
        "",
    ],
)
def test_agent_turns_get_uuid5(run_id: str) -> None:
    expected = str(uuid.uuid5(ids.AGENT_TURN_NS, f"{KEY}:{run_id}"))
    assert ids.message_id(KEY, run_id) == expected == ids.agent_turn_message_id(KEY, run_id)


def test_agent_turn_ids_are_deterministic_and_distinct() -> None:
    a = ids.message_id(KEY, "run-1")
    assert a == ids.message_id(KEY, "run-1")
    assert a != ids.message_id(KEY, "run-2")
    other_key = f"agent:main:openwebui-{USER}-{MSG}"
    assert a != ids.message_id(other_key, "run-1")
    assert uuid.UUID(a).version == 5


def test_namespace_is_the_documented_constant() -> None:
    assert ids.AGENT_TURN_NS == uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/openclaw/owc#agent-turn")


def test_run_id_constructors_round_trip() -> None:
    for build, kind in ((ids.reply_run_id, "reply"), (ids.input_run_id, "input"), (ids.resume_run_id, "resume")):
        run_id = build(CHAT, MSG, "1764420000000")
        ref = ids.parse_run_id(run_id)
        assert ref == ids.RunRef(chat_id=CHAT, message_id=MSG, kind=kind, token="1764420000000")
        assert ids.message_id(KEY, run_id) == MSG
    action = ids.action_run_id("compact", CHAT, "1")
    assert action.startswith("owui-action-") and ids.message_id(KEY, action) is None
    assert ids.parse_run_id("e45a91a6-cb86-4bdd-8bba-fa84994aecbd") is None


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (KEY, ids.SessionRef("main", USER, CHAT)),
        (f"agent:ops:openwebui-alice-{CHAT}", ids.SessionRef("ops", "alice", CHAT)),
        (f"agent:main:openwebui-a-b-c-{CHAT}", ids.SessionRef("main", "a-b-c", CHAT)),
        ("agent:main:main", None),
        ("main", None),
        ("agent:main:cron:nightly", None),
        (f"agent:main:openwebui-{USER}-{CHAT}:subagent:7d1e", None),  # sub-agent session under a chat
        (f"agent:main:subagent:{CHAT}", None),
        (f"agent:main:acp:{CHAT}", None),
        (f"agent:main:openwebui--{CHAT}", None),  # empty user id
        (f"agent:main:openwebui-{USER}-{CHAT[:-1]}", None),  # chat id not 36 chars
        (f"agent::openwebui-{USER}-{CHAT}", None),
        (f"agent:main:telegram-{USER}-{CHAT}", None),
    ],
)
def test_parse_session_key(key: str, expected: ids.SessionRef | None) -> None:
    assert ids.parse_session_key(key) == expected
    if expected is not None:
        assert expected.key == key


@given(st.text(), st.text())
def test_message_id_never_raises(key: str, run_id: str) -> None:
    result = ids.message_id(key, run_id)
    assert result is None or isinstance(result, str)


_WITH_SURROGATES = st.text(
    alphabet=st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
)


@given(_WITH_SURROGATES, _WITH_SURROGATES)
def test_message_id_never_raises_on_surrogates(key: str, run_id: str) -> None:
    ids.message_id(key, run_id)
    ids.parse_session_key(key)


def test_lone_surrogate_run_id() -> None:
    assert ids.message_id(KEY, "\ud800") is not None


@given(st.text())
def test_parse_session_key_never_raises(key: str) -> None:
    ids.parse_session_key(key)
    ids.parse_run_id(key)
