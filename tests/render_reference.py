"""The live renderer and its diff as they were before issue 16 (main at c299f84), verbatim: the oracle the
incremental ones are held to (``tests/test_render_incremental.py``). Every flush rebuilt the item list and diffed
it whole; the events the tabs get must stay exactly these. Only the imports changed: the item builders and the
sentinel rule (``is_silent``, ``may_become_silent``) are copied from that commit too (the live builders make frozen
items, the live rule has fast paths)."""

# ruff: noqa

from __future__ import annotations

import copy
import re
from typing import Any

import attrs

from owc.protocol import AgentEvent, ChatEvent, Event
from owc.render.items import arguments_json, item_id, result_text
import unicodedata

from owc.render.sentinels import SILENT_SENTINELS

_EXACT = tuple(re.compile(rf"^\s*{re.escape(t)}(?:\s+{re.escape(t)})*\s*$", re.IGNORECASE) for t in SILENT_SENTINELS)


def _strip_edge_punctuation(text: str) -> str:
    start, end = 0, len(text)
    while start < end and unicodedata.category(text[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return text[start:end]


def is_silent(text: str) -> bool:
    if not text or len(text) > 200:  # the tokens, even repeated a few times, are short
        return False
    bare = _strip_edge_punctuation(text.strip())
    return any(rx.match(text) or rx.match(bare) for rx in _EXACT)


def may_become_silent(text: str) -> bool:
    """Empty, a sentinel, or a prefix of one: not yet known to be something to show."""
    stripped = text.strip()
    if not stripped or is_silent(stripped):
        return True
    upper = stripped.upper()
    return any(s.startswith(upper) for s in SILENT_SENTINELS)


def message_item(item_id_: str, text: str, *, done: bool) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id_,
        "status": "completed" if done else "in_progress",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def function_call_item(call_id: str, name: str, args: Any, *, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": call_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments_json(args),
        "status": status,
    }


def function_call_output_item(item_id_: str, call_id: str, text: str, *, is_error: bool) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "id": item_id_,
        "call_id": call_id,
        "output": [{"type": "input_text", "text": text}],
        "status": "failed" if is_error else "completed",
    }


def _text_length(message: Any) -> int:
    """The length of a chat message's text without building it."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return len(content)
    if not isinstance(content, list):
        return 0
    return sum(
        len(p["text"])
        for p in content
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def _silent_at_end(text: str) -> bool:
    """Shows nothing once the text is final: blank, or exactly a sentinel (a mere prefix is shown)."""
    return not text.strip() or is_silent(text)


@attrs.define
class _Call:
    call_id: str
    name: str
    args: Any = None
    result: str | None = None
    is_error: bool = False
    version: int = 0  # bumped when its args or result change: the key of its cached items
    start_seq: int | None = None  # the run seq of the start that made it


def call_key(call_id: str, n: int) -> str:
    """The key (and card id) of the ``n``-th call of one run that uses ``call_id``: the id itself for the first,
    ``<id>#<n>`` after it. Live rendering and the transcript name reused ids alike, so a message finished from
    its transcript keeps the cards the tabs were shown."""
    return call_id if n == 1 else f"{call_id}#{n}"


@attrs.define
class TurnRenderer:
    run_id: str
    session_key: str | None = None
    terminal: ChatEvent | None = None
    lifecycle_ended: bool = False
    gaps: list[str] = attrs.field(factory=list)
    version: int = 0  # bumped on every change: a writer diffs only when it moved
    _order: list[tuple[str, Any]] = attrs.field(factory=list)  # ("text", start offset) | ("call", id) | ("result", id)
    _calls: dict[str, _Call] = attrs.field(factory=dict)
    #: A tool call id -> how many calls used it (``call_1``, then ``call_1#2`` ...): models reuse ids.
    _uses: dict[str, int] = attrs.field(factory=dict)
    _segment_from: int | None = 0  # where the next text segment starts, once text grows past it
    _last_chat_seq: int = -1
    _last_agent_seq: int = -1
    # The run's visible text, run-wide (what chat's cumulative message holds), kept as chunks so a delta
    # costs O(len(delta)) however long the run is; ``text`` joins them on demand.
    _chunks: list[str] = attrs.field(factory=list)
    _length: int = 0
    _joined: str | None = ""
    _shows_text: bool = False  # the text is known not to be (a prefix of) a sentinel
    # Output items already built, by what they depend on: a writer renders after every change, and
    # rebuilding every card and segment each time made a long run's cost per event grow with its length.
    _items: dict[tuple[Any, ...], dict[str, Any]] = attrs.field(factory=dict)
    _item_keys: dict[tuple[str, Any], tuple[Any, ...]] = attrs.field(factory=dict)  # the live key per element

    @property
    def text(self) -> str:
        if self._joined is None:
            self._joined = "".join(self._chunks)
            self._chunks = [self._joined]
        return self._joined

    # ------------------------------------------------------------------ feeding

    def feed(self, event: Event) -> bool:
        """Take one event of this run; True if the rendering changed."""
        before = self.version
        if isinstance(event, ChatEvent):
            self._chat(event)
        elif isinstance(event, AgentEvent):
            self._agent(event)
        return self.version != before

    def mark_gap(self, reason: str) -> None:
        """Events of this run may have been lost (seq gap, reconnect): the stream alone is not complete."""
        self.gaps.append(reason)
        self.version += 1

    def _chat(self, event: ChatEvent) -> None:
        if event.is_terminal:
            if self.terminal is not None:
                return  # a run has one terminal; a repeat changes nothing
        elif self.terminal is not None:
            return  # a delta after the run's terminal is stale: the terminal's text stands
        elif event.run_seq is not None:
            # The flushed last delta and the terminal share a seq (live), so only deltas are ordered here.
            if event.run_seq <= self._last_chat_seq:
                return  # a duplicate or an older delta
            self._last_chat_seq = event.run_seq
        if event.state in ("delta", "final", "aborted", "error"):
            if event.message is not None:
                delta = event.delta_text
                if delta and not event.replace and _text_length(event.message) == self._length + len(delta):
                    # The common case, in O(len(delta)): the cumulative message is what we have plus this
                    # delta (lengths agree and the seq is newer), so the run-long string is not compared.
                    self._append(delta)
                else:
                    self._set_text(event.text, replace=event.replace)
            elif event.delta_text:
                self._append(event.delta_text)
        if event.is_terminal:
            self.terminal = event
            self.version += 1

    def _append(self, delta: str) -> None:
        self._chunks.append(delta)
        self._length += len(delta)
        self._joined = None
        self._open_segment()
        self.version += 1

    def _open_segment(self) -> None:
        """Text grew past a tool call: what follows is a new message item. Every segment starts at its own
        offset (two at one offset would render the same text twice, with one item id)."""
        if self._segment_from is not None and self._length > self._segment_from:
            start = self._segment_from
            self._segment_from = None
            if not any(kind == "text" and value == start for kind, value in self._order):
                self._order.append(("text", start))

    def _set_text(self, new: str, *, replace: bool) -> None:
        old = self.text
        if new == old:
            return
        if not replace and old.startswith(new):
            return  # stale cumulative snapshot: shorter than what we have
        self._chunks, self._length, self._joined = [new], len(new), new
        if not new.startswith(old):
            self._shows_text = False  # replaced: decide again
            self._items.clear()  # segments' texts changed under their offsets
            self._item_keys.clear()
        if len(new) < len(old):
            # A replacement shortened the text: the segments that started in the cut-off part are gone
            # (the text they held no longer exists); the rest keep their places among the tool cards.
            self._order = [
                (kind, value) for kind, value in self._order if kind != "text" or value < len(new) or value == 0
            ]
            if self._segment_from is not None:
                self._segment_from = min(self._segment_from, len(new))
        self._open_segment()
        self.version += 1

    def _agent(self, event: AgentEvent) -> None:
        if event.run_seq is not None and event.via == "agent":
            # session.tool carries the agent seq too, but arrives on other connections instead of agent tool
            # events; both are deduplicated per call below.
            if event.run_seq <= self._last_agent_seq:
                return
            self._last_agent_seq = event.run_seq
        if event.tool is not None:
            tool = event.tool
            if tool.phase == "start":
                self._start_call(tool.tool_call_id, tool.name or "tool", tool.args, start_seq=event.run_seq)
            elif tool.phase == "result":
                call = self._start_call(tool.tool_call_id, tool.name or "tool", None)
                text = result_text(tool.result)
                if call.result != text or call.is_error != tool.is_error:
                    if call.result is None:
                        self._order.append(("result", call.call_id))
                    call.result, call.is_error = text, tool.is_error
                    call.version += 1
                    self.version += 1
        elif (
            event.item is not None
            and event.item.kind == "tool"
            and event.item.phase == "start"
            and event.item.tool_call_id
        ):
            self._start_call(event.item.tool_call_id, event.item.name or "tool", None, start_seq=event.run_seq)
        elif event.lifecycle is not None and event.lifecycle.phase in ("end", "error"):
            if not self.lifecycle_ended:
                self.lifecycle_ended = True
                self.version += 1

    def _start_call(self, call_id: str, name: str, args: Any, *, start_seq: int | None = None) -> _Call:
        """The call ``call_id`` names, made on its first sign. A start (``start_seq``: its run seq) that names a
        call already answered, and is not that call's own start again, is a new call with a reused id (a model
        that always says ``call_1``): it gets a card of its own, keyed ``call_1#2`` as the transcript's second
        ``call_1`` is (``call_key``)."""
        uses = self._uses.get(call_id, 1)
        call = self._calls.get(call_key(call_id, uses))
        if call is not None and start_seq is not None and call.result is not None and start_seq != call.start_seq:
            uses, call = uses + 1, None
        if call is None:
            self._uses[call_id] = uses
            key = call_key(call_id, uses)
            call = self._calls[key] = _Call(key, name, args, start_seq=start_seq)
            self._order.append(("call", key))
            self._segment_from = self._length  # text after the call is a new message item
            self.version += 1
        elif args is not None and call.args is None:
            call.args = args
            call.version += 1
            self.version += 1
        return call

    # ------------------------------------------------------------------ reading

    @property
    def tool_count(self) -> int:
        return len(self._calls)

    @property
    def holds_back(self) -> bool:
        """Text arrived that shows nothing yet: it may still become a sentinel, or be a short answer that only
        the run's ``chat`` terminal (or its transcript) can tell from one."""
        return self._length > 0 and not self.showable

    @property
    def showable(self) -> bool:
        """A message is made on the first tool start or the first text that cannot become a sentinel, for a
        heartbeat runner's turn as for any (``isHeartbeat`` hides nothing: the Gateway's own chat shows a
        heartbeat's reply, and its live deltas and a bare ``HEARTBEAT_OK`` never reach a client; measured on
        2026.9.6). While the run streams, a prefix of a sentinel (``NO``) is held back: it
        may still become one. At the run's terminal it no longer can, so only an exact sentinel (or blank
        text) shows nothing: a short answer such as ``NO`` or ``A`` is a message like any other."""
        if self._calls or self._shows_text:
            return True
        # Only a short text can still be (a prefix of) a sentinel; once known, the answer sticks.
        if self._length == 0:
            return False
        if self.terminal is not None:
            self._shows_text = not _silent_at_end(self.text)
        else:
            self._shows_text = not may_become_silent(self.text)
        return self._shows_text

    def output(self, *, done: bool = False) -> list[dict[str, Any]]:
        """The run's output items now. While running, text that may still become a sentinel is held back;
        once ``done`` or past the run's terminal (the text can no longer grow), only an exact sentinel is
        dropped."""
        items: list[dict[str, Any]] = []
        ended = done or self.terminal is not None
        # Text segments start at increasing offsets in ``_order``: each ends where the next one starts.
        starts = [v for k, v in self._order if k == "text"]
        ends = dict(zip(starts, starts[1:]))
        last = len(self._order) - 1
        for index, (kind, key) in enumerate(self._order):
            if kind == "text":
                end = ends.get(key, self._length)
                closed = done or index < last
                item = self._item(
                    ("text", key, end, closed, ended), lambda: self._text_item(key, end, closed=closed, ended=ended)
                )
                if item:
                    items.append(item)
            elif kind == "call":
                call = self._calls[key]
                status = (
                    "in_progress" if call.result is None and not done else ("failed" if call.is_error else "completed")
                )
                items.append(
                    self._item(
                        ("call", key, call.version, status),
                        lambda: function_call_item(call.call_id, call.name, call.args, status=status),
                    )
                )
            else:
                call = self._calls[key]
                items.append(
                    self._item(
                        ("result", key, call.version),
                        lambda: function_call_output_item(
                            item_id("fco", self.run_id, call.call_id),
                            call.call_id,
                            call.result or "",
                            is_error=call.is_error,
                        ),
                    )
                )
        return items

    def _item(self, cache_key: tuple[Any, ...], build: Any) -> dict[str, Any]:
        """The item for ``cache_key``, built once; the element's previous item is dropped (a growing text
        segment would otherwise leave one stale copy of itself per change)."""
        item = self._items.get(cache_key)
        if item is None:
            item = self._items[cache_key] = build()
            element = cache_key[:2]
            stale = self._item_keys.get(element)
            if stale is not None and stale != cache_key:
                self._items.pop(stale, None)
            self._item_keys[element] = cache_key
        return item

    def _text_item(self, start: int, end: int, *, closed: bool, ended: bool) -> dict[str, Any]:
        """A text segment's message item, or ``{}`` while it shows nothing (blank, or a sentinel; before the
        run's end also a prefix of one)."""
        segment = self.text[start:end].strip("\n")
        hidden = _silent_at_end(segment) if ended else may_become_silent(segment)
        if hidden:
            return {}
        return message_item(item_id("msg", self.run_id, f"text:{start}"), segment, done=closed)

    @property
    def complete(self) -> bool:
        """The stream saw the whole run: a terminal and no gap."""
        return self.terminal is not None and not self.gaps


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
