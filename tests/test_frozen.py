"""Frozen output items (issue 16): shared instead of deep-copied, and still impossible to change once recorded."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import orjson
import pytest

from owc.emit import RecordingEmitter
from owc.protocol import EventFrame
from owc.protocol.events import parse_event
from owc.render import TurnRenderer, diff, finish, snapshot_event
from owc.render.frozen import FrozenDict, FrozenList, freeze, own


def events(run: str = "r") -> list[Any]:
    """Text, a card and its result, more text: every kind of item."""
    tool = {"phase": "start", "name": "t", "toolCallId": "c1", "args": {"q": 1}}
    result = {"phase": "result", "name": "t", "toolCallId": "c1", "isError": False, "result": "ok"}
    frames = [
        EventFrame("chat", {"runId": run, "sessionKey": "k", "seq": 1, "state": "delta", "deltaText": "Hello"}),
        EventFrame("agent", {"runId": run, "sessionKey": "k", "seq": 2, "stream": "tool", "data": tool}),
        EventFrame("agent", {"runId": run, "sessionKey": "k", "seq": 3, "stream": "tool", "data": result}),
        EventFrame("chat", {"runId": run, "sessionKey": "k", "seq": 4, "state": "delta", "deltaText": "!"}),
    ]
    return [parse_event(frame) for frame in frames]


def test_items_are_frozen_all_the_way_down() -> None:
    r = TurnRenderer("r")
    for event in events():
        r.feed(event)
    for output in (r.output(), r.output(done=True)):
        assert [item["type"] for item in output] == ["message", "function_call", "function_call_output", "message"]
        for item in output:
            assert isinstance(item, FrozenDict)
            with pytest.raises(TypeError):
                item["status"] = "completed"
            parts = item.get("content") or item.get("output")
            if parts is not None:
                assert isinstance(parts, FrozenList)
                with pytest.raises(TypeError):
                    parts.append({})
                with pytest.raises(TypeError):
                    parts[0]["text"] = "changed"


def test_frozen_items_read_serialize_and_copy_like_plain_ones() -> None:
    item = freeze({"type": "message", "content": [{"type": "output_text", "text": "x"}]})
    plain = {"type": "message", "content": [{"type": "output_text", "text": "x"}]}
    assert item == plain and orjson.dumps(item) == orjson.dumps(plain)
    for thawed in (copy.deepcopy(item), copy.copy(item), item.copy()):
        assert type(thawed) is dict and thawed == plain
        thawed["type"] = "changed"  # a copy is the caller's to change
    deep = copy.deepcopy(item)
    deep["content"][0]["text"] = "y"  # Open WebUI deep-copies a snapshot's output and folds deltas into it
    assert item["content"][0]["text"] == "x"
    back = pickle.loads(pickle.dumps(item))
    assert back == item and type(back) is FrozenDict and type(back["content"]) is FrozenList
    for change in (
        lambda: item.update(a=1),
        lambda: item.setdefault("a", 1),
        lambda: item.pop("type"),
        lambda: item.popitem(),
        lambda: item.clear(),
        lambda: item.__ior__({"a": 1}),
        lambda: item.__delitem__("type"),
        lambda: item["content"].extend([1]),
        lambda: item["content"].insert(0, 1),
        lambda: item["content"].__iadd__([1]),
        lambda: item["content"].sort(),
        lambda: item["content"].__delitem__(0),
    ):
        with pytest.raises(TypeError):
            change()


def test_own_shares_frozen_parts_and_copies_the_rest() -> None:
    item = freeze({"type": "function_call", "id": "c1"})
    event = {"type": "chat:completion", "data": {"output": [item, {"id": "plain", "content": ["x"]}]}}
    kept = own(event)
    assert kept == event
    assert kept["data"]["output"][0] is item  # frozen: shared
    event["data"]["output"][1]["content"].append("later")
    event["data"]["output"].append("later")
    assert kept["data"]["output"] == [item, {"id": "plain", "content": ["x"]}]  # mutable: copied
    snapshot = snapshot_event(event["data"]["output"])
    event["data"]["output"][1]["content"].append("even later")
    assert snapshot["data"]["output"][1]["content"] == ["x", "later"]


def test_a_finished_output_from_the_transcript_takes_an_oversized_result_from_the_stream() -> None:
    """The one place that changed an item in place (a placeholder result) replaces it now."""
    from owc.protocol import parse_chat_history

    placeholder = "[chat.history omitted: message too large]"
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": "c1", "name": "t", "arguments": {}}],
                    "__openclaw": {"runId": "r"},
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "t",
                    "content": [{"type": "text", "text": placeholder}],
                    "isError": False,
                    "__openclaw": {"runId": "r"},
                },
            ],
        }
    )
    r = TurnRenderer("r")
    for event in events():
        r.feed(event)
    finished = finish(r, history)
    assert finished.source == "transcript"
    assert [item.get("output") for item in finished.output if item["type"] == "function_call_output"] == [
        [{"type": "input_text", "text": "ok"}]
    ]


async def test_the_recording_emitter_keeps_what_it_was_given() -> None:
    """Recorded events and live copies cannot change later, though frozen items are no longer copied."""
    emitter = RecordingEmitter()
    r = TurnRenderer("r")
    shown: list[dict[str, Any]] = []
    for event in events():
        r.feed(event)
        now = r.output()
        for told in diff(shown, now).events:
            await emitter.emit("chat", "m", "u", told)
        await emitter.save_stream("chat", "m", now)
        shown = now
    saved = emitter.streams[("chat", "m")]
    recorded = [orjson.dumps(e.event) for e in emitter.events]
    r.feed(
        parse_event(
            EventFrame("chat", {"runId": "r", "sessionKey": "k", "seq": 5, "state": "delta", "deltaText": " more"})
        )
    )
    r.output()
    r.output(done=True)
    message = {"type": "chat:messages", "data": {"messages": {"m": {"id": "m", "done": False}}}}
    await emitter.emit("chat", "m", "u", message)
    message["data"]["messages"]["m"]["done"] = True  # the writer's own dicts are copied
    assert emitter.events[-1].event["data"]["messages"]["m"]["done"] is False
    assert [orjson.dumps(e.event) for e in emitter.events[:-1]] == recorded
    assert saved is emitter.streams[("chat", "m")] and saved[-1]["content"][0]["text"] == "!"
    saved_list = emitter.streams[("chat", "m")]
    shown.append({"id": "appended later"})  # the list the writer handed over is the writer's: the copy is not
    assert len(saved_list) == 4
