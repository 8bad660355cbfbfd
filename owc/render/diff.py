"""From one rendering of a run to the next: the events Open WebUI folds for a live message. Pure.

Two streams, as Open WebUI's own middleware produces them:

* for the user's tabs, raw Responses events wrapped as ``{"type": "response:completion", "data": event}``:
  ``response.output_item.added``, ``response.output_text.delta`` (appended text of a message item, by
  ``output_index``), ``response.output_item.done``;
* for the shared chat room, a ``{"type": "chat:completion", "data": {"output": [...]}}`` snapshot.

When a change is not expressible as those events (a text that was replaced, not extended; an item that went
away; items that moved), the diff says ``needs_snapshot`` and the snapshot carries the truth for everyone.
``apply_events`` is the fold Open WebUI's ``handle_responses_streaming_event`` performs, used to check
that a diff stream reproduces the rendering.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs


@attrs.frozen
class Diff:
    events: tuple[dict[str, Any], ...]
    needs_snapshot: bool

    @property
    def empty(self) -> bool:
        return not self.events and not self.needs_snapshot


def _wrap(event: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response:completion", "data": event}


def _text_delta(item: dict[str, Any], index: int, delta: str) -> dict[str, Any]:
    return _wrap(
        {
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": index,
            "content_index": 0,
            "delta": delta,
        }
    )


def _message_text(item: dict[str, Any]) -> str:
    content = item.get("content") or []
    return "".join(c.get("text", "") for c in content if isinstance(c, dict))


def diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> Diff:
    events: list[dict[str, Any]] = []
    old_ids = [item.get("id") for item in before]
    new_ids = [item.get("id") for item in after]
    if new_ids[: len(old_ids)] != old_ids:
        # An item vanished or the order changed: only a snapshot says that.
        return Diff(events=(), needs_snapshot=True)
    for index, item in enumerate(after):
        if index >= len(before):
            if item.get("type") == "message":
                empty = {**item, "status": "in_progress", "content": [{"type": "output_text", "text": ""}]}
                events.append(_wrap({"type": "response.output_item.added", "output_index": index, "item": empty}))
                text = _message_text(item)
                if text:
                    events.append(_text_delta(item, index, text))
                if item.get("status") == "completed":
                    events.append(_wrap({"type": "response.output_item.done", "output_index": index, "item": item}))
            else:
                events.append(_wrap({"type": "response.output_item.added", "output_index": index, "item": item}))
                if item.get("status") != "in_progress":
                    events.append(_wrap({"type": "response.output_item.done", "output_index": index, "item": item}))
            continue
        old = before[index]
        if old is item or old == item:  # the renderer hands back the same item object while it is unchanged
            continue
        if item.get("type") == "message":
            old_text, new_text = _message_text(old), _message_text(item)
            if not new_text.startswith(old_text):
                return Diff(events=(), needs_snapshot=True)
            if new_text != old_text:
                events.append(_text_delta(item, index, new_text[len(old_text) :]))
            if item.get("status") != old.get("status"):
                events.append(_wrap({"type": "response.output_item.done", "output_index": index, "item": item}))
        else:
            events.append(_wrap({"type": "response.output_item.done", "output_index": index, "item": item}))
    return Diff(events=tuple(events), needs_snapshot=False)


def snapshot_event(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"type": "chat:completion", "data": {"output": copy.deepcopy(output), **extra}}


def apply_events(output: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold events into an output list the way Open WebUI's frontend and backend do."""
    out = copy.deepcopy(output)
    for event in events:
        if event.get("type") == "chat:completion":
            if isinstance(event["data"].get("output"), list):
                out = copy.deepcopy(event["data"]["output"])
            continue
        data = event.get("data", {})
        kind = data.get("type", "")
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = copy.deepcopy(data["item"])
            existing = next((i for i, x in enumerate(out) if x.get("id") == item.get("id")), None)
            if existing is not None:
                out[existing] = item
            elif 0 <= data.get("output_index", len(out)) < len(out):
                out.insert(data["output_index"], item)
            else:
                out.append(item)
        elif kind == "response.output_text.delta":
            index = data.get("output_index", len(out) - 1)
            item = out[index]
            content = item.setdefault("content", [])
            while len(content) <= data.get("content_index", 0):
                content.append({"type": "output_text", "text": ""})
            part = content[data.get("content_index", 0)]
            part["text"] = part.get("text", "") + data.get("delta", "")
    return out
