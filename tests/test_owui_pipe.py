"""The Pipe's entry points (``owc/owui/pipe.py``) where they decide without Open WebUI: what a request turns
into (the session key, the run id carrying Open WebUI's reply stub, the text, the model), the lines a person sees
when nothing can be sent, background tasks kept away from the agent, and the model list with owc not running.
The user turn's stream itself runs in the W tier (the real server) and in ``tests/test_inline.py``."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from owc import ids
from owc.owui import pipe as owui_pipe
from owc.owui.pipe import TEMPORARY_CHAT, Turn, _turn_from, last_user_text
from owc.runtime import KEEP_MODEL

CHAT, M, USER = str(uuid.uuid4()), str(uuid.uuid4()), "user-7"
VALVES = SimpleNamespace(AGENT_ID="", MODEL_WHITELIST="", MAX_MODELS=30)


def _body(text: Any = "hello", model: str = "openclaw.main") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "earlier"}, {"role": "user", "content": text}]}


def test_a_request_becomes_a_run_on_the_chats_session_whose_id_carries_the_reply_stub() -> None:
    meta = {"chat_id": CHAT, "message_id": M, "user_message_id": "u-1"}
    turn = _turn_from(VALVES, _body(), {"id": USER}, meta)
    assert isinstance(turn, Turn)
    assert turn.session_key == ids.session_key("main", USER, CHAT)
    assert ids.message_id(turn.session_key, turn.run_id) == M  # the identity rule maps it to Open WebUI's stub
    assert turn.run_id.startswith(f"msg-{CHAT}-{M}-input-") and turn.text == "hello" and turn.model is None
    again = _turn_from(VALVES, _body(), {"id": USER}, meta)
    assert isinstance(again, Turn) and again.run_id == turn.run_id  # a retried request: the same run id


def test_a_gateway_model_from_the_picker_is_pinned_and_another_agents_is_left_alone() -> None:
    meta = {"chat_id": CHAT, "message_id": M}
    turn = _turn_from(VALVES, _body(model="openclaw.main~ollama/qwen3:8b"), {"id": USER}, meta)
    assert isinstance(turn, Turn) and turn.model == "ollama/qwen3:8b"
    other = _turn_from(VALVES, _body(model="openclaw.ops~ollama/qwen3:8b"), {"id": USER}, meta)
    assert isinstance(other, Turn) and other.model is KEEP_MODEL


@pytest.mark.parametrize(
    ("meta", "user", "body", "says"),
    [
        ({"chat_id": "local:abc", "message_id": M}, {"id": USER}, _body(), TEMPORARY_CHAT),
        ({"message_id": M}, {"id": USER}, _body(), "named none"),
        ({"chat_id": CHAT, "message_id": M}, {}, _body(), "named none"),
        ({"chat_id": CHAT, "message_id": M}, {"id": USER}, _body(text=[]), "no text"),
        ({"chat_id": CHAT, "message_id": M}, {"id": USER}, {"messages": None}, "no text"),
    ],
)
def test_what_cannot_be_sent_is_one_line(meta: Any, user: Any, body: Any, says: str) -> None:
    said = _turn_from(VALVES, body, user, meta)
    assert isinstance(said, str) and says in said and "\n" not in said


def test_a_request_whose_reloaded_history_lost_the_message_reads_it_from_the_request() -> None:
    """Open WebUI 0.12.4 rebuilds a saved chat's messages from its database; a stale read there (a pooled SQLite
    connection left on an old snapshot by a task cancelled mid-read: a "Send now" landing as the previous reply
    ended) finds none and sends the Pipe no messages. The request still names its message (``__metadata__
    ["user_message"]``): the agent gets its text, not a refusal."""
    meta = {"chat_id": CHAT, "message_id": M, "user_message_id": "u-2"}
    sent = {**meta, "user_message": {"id": "u-2", "role": "user", "content": "then this", "parentId": "a-1"}}
    for body in ({"model": "openclaw.main", "messages": []}, {"model": "openclaw.main"}):
        turn = _turn_from(VALVES, body, {"id": USER}, sent)
        assert isinstance(turn, Turn) and turn.text == "then this"
        refused = _turn_from(VALVES, body, {"id": USER}, meta)  # nothing named: still one line
        assert isinstance(refused, str) and "no text" in refused
    system_only = {"model": "openclaw.main", "messages": [{"role": "system", "content": "Be brief."}]}
    turn = _turn_from(VALVES, system_only, {"id": USER}, sent)
    assert isinstance(turn, Turn) and turn.text == "then this"
    assert turn.images_in_content is False  # its images come from its files (test_owui_attachments)
    # A history that has the user's message is read as before (the server's own reading of it wins).
    turn = _turn_from(VALVES, _body(text="as reloaded"), {"id": USER}, sent)
    assert isinstance(turn, Turn) and turn.text == "as reloaded" and turn.images_in_content is True


def test_a_regenerate_of_an_agents_turn_is_never_sent_the_agents_words_as_the_users() -> None:
    """A Regenerate or a Continue of an agent's turn (a reply to no person's message) names that turn's parent as
    the request's message, and in a chat of agent turns that parent is the agent's own earlier reply; the rebuilt
    history then holds assistant messages only. Neither is a person's message: refused as before."""
    earlier = "Deploy finished. Shall I delete the old cluster?"
    meta = {"chat_id": CHAT, "message_id": M, "user_message_id": "a-1"}
    named = {**meta, "user_message": {"id": "a-1", "role": "assistant", "content": earlier}}
    for body in (
        {"model": "openclaw.main", "messages": [{"role": "assistant", "content": earlier}]},
        {"model": "openclaw.main", "messages": []},  # the named message is the agent's, whatever the history
    ):
        refused = _turn_from(VALVES, body, {"id": USER}, named)
        assert isinstance(refused, str) and "no text" in refused
    # A person's message named while the history holds the agent's turns only: the history is Open WebUI's own
    # reading (not the stale one, which leaves the system prompt alone), so it is not replaced either.
    person = {**meta, "user_message": {"id": "u-9", "role": "user", "content": "then this"}}
    body = {"model": "openclaw.main", "messages": [{"role": "assistant", "content": earlier}]}
    refused = _turn_from(VALVES, body, {"id": USER}, person)
    assert isinstance(refused, str) and "no text" in refused


def test_the_users_text_is_read_from_strings_and_text_parts() -> None:
    parts = [
        {"type": "text", "text": "look at"},
        {"type": "image_url", "image_url": {}},
        {"type": "text", "text": "this"},
    ]
    assert last_user_text([{"role": "user", "content": parts}]) == "look at\nthis"
    assert last_user_text([{"role": "assistant", "content": "x"}]) == ""
    assert last_user_text("nonsense") == ""


def test_background_tasks_never_start_the_runtime_or_reach_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(*_: Any, **__: Any) -> bool:
        raise AssertionError("a background task must not start owc or send anything")

    monkeypatch.setattr(owui_pipe, "_start", refuse)
    body = _body()
    answer = asyncio.run(owui_pipe.pipe(VALVES, body, task="title_generation", task_body=body))
    assert isinstance(answer, str) and '"title"' in answer


def test_the_model_list_opens_with_owc_not_running() -> None:
    listed = asyncio.run(owui_pipe.pipes(VALVES))
    assert listed[0]["id"] == "main" and "OpenClaw" in listed[0]["name"]


def test_a_gateway_refusal_that_ended_owc_is_the_line_the_person_sees() -> None:
    from owc.gateway import Refused
    from owc.owui.pipe import stopped_line
    from owc.protocol import ErrorShape

    refusal = Refused(ErrorShape(code="NOT_PAIRED", message="device pairing required"))
    wrapped = BaseExceptionGroup("runtime", [ValueError("other"), BaseExceptionGroup("client", [refusal])])
    ended = RuntimeError("guest ended")
    ended.__cause__ = wrapped
    line = stopped_line(SimpleNamespace(run_outcome=SimpleNamespace(error=ended)))
    assert line == refusal.refusal.reply and "NOT_PAIRED" in line and "message was not sent" in line
    assert "\n" not in line
    assert "see Open WebUI's log" in stopped_line(SimpleNamespace(run_outcome=None))


def test_an_image_in_the_message_becomes_a_chat_send_attachment() -> None:
    import base64

    from owc.owui.pipe import _attachments

    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    content = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}},
    ]
    turn = _turn_from(VALVES, _body(text=content), {"id": USER}, {"chat_id": CHAT, "message_id": M})
    assert isinstance(turn, Turn) and turn.text == "what is this?"
    found, problems = asyncio.run(_attachments(turn))
    assert problems == [] and len(found) == 1
    assert found[0]["mimeType"] == "image/png" and base64.b64decode(found[0]["content"]) == png
    only_image = _turn_from(VALVES, _body(text=content[1:]), {"id": USER}, {"chat_id": CHAT, "message_id": M})
    assert isinstance(only_image, Turn) and only_image.text == ""  # an image alone is sent too


def test_a_turn_in_a_chat_another_user_shared_goes_to_the_owners_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24, item 13: a user writing in a chat shared with them (Open WebUI 0.12.4's ``continue`` share: the
    request names the owner's chat, ``__user__`` is the sender) sends to the chat's own session, its owner's
    (``Runtime.chat_session_key``), never to a second session keyed by the sender."""
    from owc.owui import process as owui_process
    from owc.runs.inline import UserTurnError

    asked: list[tuple[str, str, str]] = []
    sent: list[str] = []

    class Runtime:
        keeper = SimpleNamespace(emitter=None)

        async def chat_session_key(self, agent: str, chat: str, sender: str) -> str:
            asked.append((agent, chat, sender))
            return ids.session_key(agent, "owner-1", chat)

        async def busy(self, key: str) -> bool:
            return False  # no run going on the session: the turn is not queued

        async def user_turn(self, key: str, run_id: str, text: str, **_: Any) -> Any:
            sent.append(key)
            raise UserTurnError("sent")

    class Host:
        async def run_in_trio(self, fn: Any, *args: Any) -> Any:
            return await fn(*args)

    monkeypatch.setattr(owui_process, "current_runtime", lambda: (Host(), Runtime()))
    turn = _turn_from(VALVES, _body(), {"id": USER}, {"chat_id": CHAT, "message_id": M})
    assert isinstance(turn, Turn)

    async def relay() -> list[Any]:
        return [item async for item in owui_pipe.user_turn(turn)]

    assert asyncio.run(relay()) == ["sent"]
    assert asked == [("main", CHAT, USER)] and sent == [ids.session_key("main", "owner-1", CHAT)]
