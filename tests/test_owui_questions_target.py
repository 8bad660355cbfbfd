"""Which message a question's dialog (an ``execute`` event) is addressed to: one every tab on the chat holds. A page
runs an ``execute`` only about a message its history holds; owc's reply is often claimed in the database (the chat's
current message) before its ``chat:messages`` reached the tab, and a dialog addressed to it was lost (CI, the
thirteenth session, at load). The user turn under it is the tab's own."""

from __future__ import annotations

from owc.owui.questions import held_message


def history(current: str | None, **messages: dict) -> dict:
    return {"currentId": current, "messages": messages}


def test_an_assistant_message_gives_its_user_turn() -> None:
    h = history("a1", u1={"id": "u1", "role": "user", "parentId": None}, a1={"role": "assistant", "parentId": "u1"})
    assert held_message(h) == "u1"


def test_a_user_turn_is_its_own_target() -> None:
    assert held_message(history("u1", u1={"role": "user", "parentId": None})) == "u1"


def test_a_parent_the_history_lacks_or_no_parent_keeps_the_current_message() -> None:
    assert held_message(history("a1", a1={"role": "assistant", "parentId": "gone"})) == "a1"
    assert held_message(history("a1", a1={"role": "assistant", "parentId": None})) == "a1"
    assert held_message(history("a1")) == "a1"  # not in the history at all: as before


def test_no_current_message_is_none() -> None:
    assert held_message(history(None)) is None
    assert held_message({}) is None
    assert held_message({"currentId": "a1", "messages": "not a dict"}) == "a1"
