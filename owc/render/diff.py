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
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from owc.render.frozen import EMPTY, FrozenDict, FrozenList, freeze, own
from owc.render.turn import TurnRenderer


@attrs.frozen
class Diff:
    events: tuple[dict[str, Any], ...]
    needs_snapshot: bool

    @property
    def empty(self) -> bool:
        return not self.events and not self.needs_snapshot


_SNAPSHOT = Diff(events=(), needs_snapshot=True)


def _wrap(event: FrozenDict) -> FrozenDict:
    return FrozenDict(type="response:completion", data=event)


def _text_delta(item: dict[str, Any], index: int, delta: str) -> FrozenDict:
    return _wrap(
        FrozenDict(
            type="response.output_text.delta",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            delta=delta,
        )
    )


def _message_text(item: dict[str, Any]) -> str:
    content = item.get("content") or []
    return "".join(c.get("text", "") for c in content if isinstance(c, dict))


def _added(events: list[dict[str, Any]], index: int, item: dict[str, Any]) -> None:
    """The events that make a new item at ``index`` appear (a message item's text comes as a delta)."""
    if item.get("type") == "message":
        empty = FrozenDict(
            {**item, "status": "in_progress", "content": FrozenList((FrozenDict(type="output_text", text=""),))}
        )
        events.append(_wrap(FrozenDict(type="response.output_item.added", output_index=index, item=empty)))
        text = _message_text(item)
        if text:
            events.append(_text_delta(item, index, text))
        if item.get("status") == "completed":
            events.append(_wrap(FrozenDict(type="response.output_item.done", output_index=index, item=item)))
    else:
        events.append(_wrap(FrozenDict(type="response.output_item.added", output_index=index, item=item)))
        if item.get("status") != "in_progress":
            events.append(_wrap(FrozenDict(type="response.output_item.done", output_index=index, item=item)))


def _changed(events: list[dict[str, Any]], index: int, old: dict[str, Any], item: dict[str, Any]) -> bool:
    """The events that turn ``old`` into ``item`` at ``index``; False if appends cannot say it (a replaced text)."""
    if old is item or old == item:  # the renderer hands back the same item object while it is unchanged
        return True
    if item.get("type") == "message":
        old_text, new_text = _message_text(old), _message_text(item)
        if not new_text.startswith(old_text):
            return False
        if new_text != old_text:
            events.append(_text_delta(item, index, new_text[len(old_text) :]))
        if item.get("status") != old.get("status"):
            events.append(_wrap(FrozenDict(type="response.output_item.done", output_index=index, item=item)))
    else:
        events.append(_wrap(FrozenDict(type="response.output_item.done", output_index=index, item=item)))
    return True


def diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> Diff:
    """The events from ``before`` to ``after``, comparing every item (O(items)); ``diff_at`` looks only where the
    renderer says something changed."""
    old_ids = [item.get("id") for item in before]
    new_ids = [item.get("id") for item in after]
    if new_ids[: len(old_ids)] != old_ids:
        # An item vanished or the order changed: only a snapshot says that.
        return _SNAPSHOT
    events: list[dict[str, Any]] = []
    for index, item in enumerate(after):
        if index >= len(before):
            _added(events, index, item)
        elif not _changed(events, index, before[index], item):
            return _SNAPSHOT
    return Diff(events=tuple(events), needs_snapshot=False)


def diff_at(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], changed: Iterable[int]) -> Diff:
    """``diff(before, after)`` when every item of ``before`` outside the positions ``changed`` is the very item
    ``after`` holds there: the same events, at the cost of what changed (and what was appended), not of the run's
    length. A long run's writer diffed its whole output on every flush: cost per event grew 115 -> ~500 us."""
    if len(after) < len(before):
        return _SNAPSHOT
    touched = sorted(i for i in set(changed) if i < len(before))
    for index in touched:  # as ``diff``: ids first, so a snapshot is decided before any event
        if after[index].get("id") != before[index].get("id"):
            return _SNAPSHOT
    events: list[dict[str, Any]] = []
    for index in touched:
        if not _changed(events, index, before[index], after[index]):
            return _SNAPSHOT
    for index in range(len(before), len(after)):
        _added(events, index, after[index])
    return Diff(events=tuple(events), needs_snapshot=False)


def snapshot_event(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A ``chat:completion`` snapshot of ``output``: its frozen items are shared, anything mutable is copied."""
    return {"type": "chat:completion", "data": {"output": own(output), **extra}}


@attrs.frozen
class Flush:
    """What one flush tells the tabs (in order) and the output they then hold (for the live copy)."""

    events: tuple[dict[str, Any], ...]
    output: FrozenList


@attrs.define
class Shown:
    """What one writer has shown the tabs of its run's message, and the next flush from it. Pure.

    A flush costs what changed since the last one: the renderer logs the places its live output changed
    (``TurnRenderer.live``) and only those are compared (``diff_at``); when the places shifted (a new epoch), or
    the message's prefix (a continuation's earlier runs) is new, everything is compared once (``diff``). Either
    way the events are exactly those ``diff(before, now)`` gives, and a flush with nothing new is None (the
    writer then emits nothing and saves no live copy)."""

    output: FrozenList = EMPTY
    _renderer: object = None
    _epoch: int = -1
    _mark: int = 0
    _prefix_of: object = None  # the prefix list ``_prefix`` was frozen from
    _prefix: FrozenList = EMPTY

    def flush(
        self, renderer: TurnRenderer, prefix: list[dict[str, Any]] | None = None, *, snapshot: bool = False
    ) -> Flush | None:
        """The events from what was shown to the run's output now (``prefix`` first, as ``Run.output``). With
        ``snapshot`` the tabs get the whole output (they may hold another writer's items), even if unchanged."""
        items, epoch, log = renderer.live()
        same_places = renderer is self._renderer and epoch == self._epoch and prefix is self._prefix_of
        if prefix is not self._prefix_of:
            self._prefix_of, self._prefix = prefix, freeze(prefix) if prefix else EMPTY
        self._renderer, self._epoch = renderer, epoch
        before, at = self.output, len(self._prefix)
        changed: list[int] | None = None
        if same_places:
            # Every other place holds the item shown there (or an equal one): only these can differ.
            changed = [at + place for place in log[self._mark :]]
            self._mark = len(log)
            if not snapshot and len(before) == at + len(items) and all(items[i - at] == before[i] for i in changed):
                return None
        self._mark = len(log)
        now = self.output = FrozenList(self._prefix + items) if at else FrozenList(items)
        if changed is None and not snapshot and now == before:
            return None
        if snapshot:
            return Flush((snapshot_event(now),), now)
        d = diff(before, now) if changed is None else diff_at(before, now, changed)
        return Flush(d.events + ((snapshot_event(now),) if d.needs_snapshot else ()), now)


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
