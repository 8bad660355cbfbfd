"""The turn renderer: every event of one run in, Open WebUI output items out. Pure.

Text comes from the run's ``chat`` events: the Gateway keeps one run-wide buffer (assistant items joined by a
blank line) and sends it whole in every delta's ``message`` plus the increment in ``deltaText``. Tool cards
come from ``agent`` ``tool`` events (the run's sender) or ``session.tool`` (everyone else), and from ``agent``
``item`` events as a fallback start. The output interleaves them in arrival order: text before a tool call,
the call, its result, the text after it.

Robust against what a connection can see twice or late: an event whose run ``seq`` is not newer than the
last of its kind is ignored, a cumulative message that is a prefix of what is known is stale, so a replayed
or reordered delta never duplicates text (the old pipe's ``ABCABC``). ``replace: true`` replaces.

The live output is kept incrementally: an event marks the elements it touched (the growing text segment, the
card that got its result, the element before a new one), and ``live()`` rebuilds only those and logs the
positions that changed, so a writer's flush costs what changed since the last one, not the run's length
(``owc.render.diff.Shown``). Items are frozen: a changed element gets a new item.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

import attrs

from owc.protocol import AgentEvent, ChatEvent, Event
from owc.protocol.media import announces_media
from owc.render import ask_card
from owc.render.frozen import FrozenDict
from owc.render.items import (
    function_call_item,
    function_call_output_item,
    item_id,
    message_item,
    result_text,
)
from owc.render.sentinels import is_silent, may_become_silent


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


#: How Tool Search names a call made inside its ``tool_call`` (measured: ``tool_search_code:call_ask1:ask_user:1``).
NESTED_PREFIX = "tool_search_code:"


def nested(call_id: str, parent_id: str | None) -> bool:
    """A call made inside another call: its events show in the parent's card, never as a card of their own. The
    transcript keeps only the parent's call and result (the nested record is a ``custom`` message), so a card of
    its own would be shown live and gone at the finalize. The ``item`` events of a nested call carry no parent
    id; their call id names the parent (``tool_search_code:<parent>:<tool>:<n>``)."""
    return parent_id is not None or call_id.startswith(NESTED_PREFIX)


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
    #: The run's ``assistant`` stream said files are coming (``mediaUrls``): a reply that shows no text may still be
    #: an answer, its files delivered after the final (``owc.protocol.media``).
    media_announced: bool = False
    gaps: list[str] = attrs.field(factory=list)
    version: int = 0  # bumped on every change: a writer diffs only when it moved
    _order: list[tuple[str, Any]] = attrs.field(factory=list)  # ("text", start offset) | ("call", id) | ("result", id)
    _calls: dict[str, _Call] = attrs.field(factory=dict)
    #: A tool call id -> how many calls used it (``call_1``, then ``call_1#2`` ...): models reuse ids.
    _uses: dict[str, int] = attrs.field(factory=dict)
    #: The calls still without a result, oldest first (call key -> tool name): what ``running_tool`` reads.
    _running: dict[str, str] = attrs.field(factory=dict)
    _segment_from: int | None = 0  # where the next text segment starts, once text grows past it
    _last_chat_seq: int = -1
    #: The epoch of the last text-bearing chat event fed (``ChatEvent.epoch``): the next one in the same epoch
    #: extends the text without its snapshot being read. Never compared by value: identity only.
    _chat_epoch: object | None = attrs.field(default=None, eq=False, repr=False)
    _last_agent_seq: int = -1
    # The run's visible text, run-wide (what chat's cumulative message holds), kept as chunks (and where each
    # starts) so a delta costs O(len(delta)) however long the run is; ``text`` joins them on demand, a segment's
    # slice joins only the chunks it spans.
    _chunks: list[str] = attrs.field(factory=list)
    _offsets: list[int] = attrs.field(factory=list)
    _length: int = 0
    _shows_text: bool = False  # the text is known not to be (a prefix of) a sentinel
    # Where each element of ``_order`` is: a call's and a result's index by element, a text segment's end by
    # index (the next segment's start; the last segment ends with the text), the starts in use, the last segment.
    _where: dict[tuple[str, Any], int] = attrs.field(factory=dict)
    _ends: dict[int, int] = attrs.field(factory=dict)
    _text_starts: set[int] = attrs.field(factory=set)
    _last_text: int = -1
    _text_ids: dict[int, str] = attrs.field(factory=dict)  # a segment's item id by its start (a SHA-1 each)
    # The live rendering (``output()`` while running), kept incrementally. Per element: the key its item was
    # built for (what the item depends on) and the item (None: shows nothing); ``_dirty``: elements an event
    # touched since. ``_out`` holds the shown items in order, ``_slot`` each element's place in it (-1: none).
    # ``_log`` lists the places changed in place or appended during the current ``_epoch``; the epoch moves when
    # places shift (an item appeared before others, one vanished, the text was rewritten), after which a reader
    # compares everything once.
    _keys: list[tuple[Any, ...] | None] = attrs.field(factory=list)
    _live: list[FrozenDict | None] = attrs.field(factory=list)
    _dirty: set[int] = attrs.field(factory=set)
    _out: list[FrozenDict] = attrs.field(factory=list)
    _slot: list[int] = attrs.field(factory=list)
    _last_shown: int = -1
    _epoch: int = 0
    _log: list[int] = attrs.field(factory=list)

    @property
    def text(self) -> str:
        if len(self._chunks) > 1:
            self._chunks, self._offsets = ["".join(self._chunks)], [0]
        return self._chunks[0] if self._chunks else ""

    def _slice(self, start: int, end: int) -> str:
        """``text[start:end]``, joining only the chunks it spans; they stay joined (the growing segment is sliced
        again at the next flush, with only the new chunks after it)."""
        if start >= end or not self._chunks:
            return ""
        chunks, offsets = self._chunks, self._offsets
        i = bisect_right(offsets, start) - 1
        j = bisect_left(offsets, end, lo=i + 1)  # chunks i .. j-1 overlap [start, end)
        if j - i > 1:
            chunks[i:j] = ["".join(chunks[i:j])]
            del offsets[i + 1 : j]
        base = offsets[i]
        chunk = chunks[i]
        if start == base and end - base == len(chunk):
            return chunk
        return chunk[start - base : end - base]

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
            # Adjacent: the previous chat event of this run came in the same gap-free stretch of the same
            # connection (``ChatEvent.epoch``), so nothing of this run's text was missed between the two.
            adjacent = event.epoch is not None and event.epoch is self._chat_epoch
            self._chat_epoch = event.epoch
            if event.has_message:
                delta = event.delta_text
                if delta and not event.replace and not event.is_terminal and adjacent:
                    # The common case, in O(len(delta)) and without reading the snapshot (issue 32: a delta's
                    # cumulative message is not even parsed, ``decode_frame``): this delta extends what we have.
                    self._append(delta)
                elif delta and not event.replace and _text_length(event.message) == self._length + len(delta):
                    # After a gap, at the start, at the end: the snapshot is read, and when it is what we have plus
                    # this delta (lengths agree and the seq is newer) the run-long string is not compared.
                    self._append(delta)
                else:
                    self._set_text(event.text, replace=event.replace)
            elif event.delta_text:
                self._append(event.delta_text)
        if event.is_terminal:
            self.terminal = event
            self.version += 1
            # Past the terminal a segment can no longer grow into a sentinel: every segment is judged again.
            self._dirty.update(i for i, (kind, _) in enumerate(self._order) if kind == "text")

    def _append(self, delta: str) -> None:
        self._chunks.append(delta)
        self._offsets.append(self._length)
        self._length += len(delta)
        self._open_segment()
        if self._last_text >= 0:
            self._dirty.add(self._last_text)  # the last segment ends with the text
        self.version += 1

    def _add(self, element: tuple[str, Any]) -> None:
        """Append an element to the order. The one before it is touched (no longer the last: a text segment
        before it is closed), and a text segment fixes where the one before it ends."""
        index = len(self._order)
        self._order.append(element)
        if index:
            self._dirty.add(index - 1)
        if element[0] == "text":
            if self._last_text >= 0:
                self._ends[self._last_text] = element[1]
                self._dirty.add(self._last_text)
            self._last_text = index
            self._text_starts.add(element[1])
        else:
            self._where[element] = index

    def _reindex(self) -> None:
        """Where every element is, after the order was filtered."""
        self._where, self._ends, self._text_starts, self._last_text = {}, {}, set(), -1
        for index, element in enumerate(self._order):
            if element[0] == "text":
                if self._last_text >= 0:
                    self._ends[self._last_text] = element[1]
                self._last_text = index
                self._text_starts.add(element[1])
            else:
                self._where[element] = index

    def _open_segment(self) -> None:
        """Text grew past a tool call: what follows is a new message item. Every segment starts at its own
        offset (two at one offset would render the same text twice, with one item id)."""
        if self._segment_from is not None and self._length > self._segment_from:
            start = self._segment_from
            self._segment_from = None
            if start not in self._text_starts:
                self._add(("text", start))

    def _set_text(self, new: str, *, replace: bool) -> None:
        old = self.text
        if new == old:
            return
        if not replace and old.startswith(new):
            return  # stale cumulative snapshot: shorter than what we have
        (self._chunks, self._offsets), self._length = ([new], [0]) if new else ([], []), len(new)
        rewritten = not new.startswith(old)
        if rewritten:
            self._shows_text = False  # replaced: decide again
        if len(new) < len(old):
            # A replacement shortened the text: the segments that started in the cut-off part are gone
            # (the text they held no longer exists); the rest keep their places among the tool cards.
            self._order = [
                (kind, value) for kind, value in self._order if kind != "text" or value < len(new) or value == 0
            ]
            self._reindex()
            if self._segment_from is not None:
                self._segment_from = min(self._segment_from, len(new))
        self._open_segment()
        if rewritten:
            self._reset_live()  # segments' texts changed under their offsets
        elif self._last_text >= 0:
            self._dirty.add(self._last_text)  # extended: only the last segment grew
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
            if nested(tool.tool_call_id, tool.parent_tool_call_id):
                return  # its parent's card shows it (the transcript keeps only the parent's call)
            if tool.phase == "start":
                self._start_call(tool.tool_call_id, tool.name or "tool", tool.args, start_seq=event.run_seq)
            elif tool.phase == "result":
                call = self._start_call(tool.tool_call_id, tool.name or "tool", None)
                text = result_text(tool.result)
                if call.result != text or call.is_error != tool.is_error:
                    if call.result is None:
                        self._add(("result", call.call_id))
                        self._running.pop(call.call_id, None)
                    call.result, call.is_error = text, tool.is_error
                    call.version += 1
                    self._dirty.add(self._where[("call", call.call_id)])  # its status
                    self._dirty.add(self._where[("result", call.call_id)])
                    self.version += 1
        elif (
            event.item is not None
            and event.item.kind == "tool"
            and event.item.phase == "start"
            and event.item.tool_call_id
            and not nested(event.item.tool_call_id, None)
        ):
            self._start_call(event.item.tool_call_id, event.item.name or "tool", None, start_seq=event.run_seq)
        elif event.stream == "assistant" and not self.media_announced and announces_media(event.data):
            self.media_announced = True
            self.version += 1  # it may make the run showable
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
            self._running[key] = ask_card.view(name, args, None).name  # the status line's name for it
            self._add(("call", key))
            self._segment_from = self._length  # text after the call is a new message item
            self.version += 1
        elif args is not None and call.args is None:
            call.args = args
            if call.call_id in self._running:  # started by its item event: its arguments may name it (ask_user)
                self._running[call.call_id] = ask_card.view(call.name, args, None).name
            call.version += 1
            self._dirty.add(self._where[("call", call.call_id)])
            if ("result", call.call_id) in self._where:
                self._dirty.add(self._where[("result", call.call_id)])
            self.version += 1
        return call

    # ------------------------------------------------------------------ reading

    @property
    def tool_count(self) -> int:
        return len(self._calls)

    @property
    def running_tool(self) -> str | None:
        """The name of the newest tool call that has no result yet (None: no tool runs): the tab's status line."""
        return next(reversed(self._running.values()), None)

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
        if self._calls or self._shows_text or self.media_announced:
            return True  # files announced: a reply of files alone is a message (they follow its final)
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
        self._refresh()
        if not done:
            return list(self._out)
        items: list[dict[str, Any]] = []
        last = len(self._order) - 1
        for index in range(len(self._order)):
            key = self._key(index, last, ended=True, done=True)
            item = self._live[index] if key == self._keys[index] else self._build(index, key)
            if item is not None:
                items.append(item)
        return items

    def live(self) -> tuple[list[FrozenDict], int, list[int]]:
        """The live output (``output()``'s items) without a copy, the epoch its places belong to, and the places
        changed in place or appended during that epoch, in order: what ``owc.render.diff.Shown`` needs to diff
        only what changed. The lists are the renderer's own: read them, never change them."""
        self._refresh()
        return self._out, self._epoch, self._log

    def _reset_live(self) -> None:
        """Every element is rendered again and the places start over (a new epoch)."""
        self._keys, self._live, self._slot, self._out = [], [], [], []
        self._dirty.clear()
        self._last_shown = -1
        self._new_epoch()

    def _new_epoch(self) -> None:
        self._epoch += 1
        self._log = []

    def _refresh(self) -> None:
        """Render the elements events touched since the last refresh, and update the live output in place (an
        item changed, or one appeared after every shown one) or, when places shift, whole in a new epoch."""
        count = len(self._order)
        grown = count - len(self._keys)
        if grown > 0:
            self._keys.extend([None] * grown)
            self._live.extend([None] * grown)
            self._slot.extend([-1] * grown)
            self._dirty.update(range(count - grown, count))
        if not self._dirty:
            return
        ended = self.terminal is not None
        last = count - 1
        shifted = False
        for index in sorted(self._dirty):
            key = self._key(index, last, ended=ended, done=False)
            if key == self._keys[index]:
                continue
            item = self._build(index, key)
            before = self._live[index]
            self._keys[index], self._live[index] = key, item
            if shifted:
                continue
            if before is not None and item is not None:
                place = self._slot[index]
                self._out[place] = item
                self._log.append(place)
            elif item is not None and index > self._last_shown:
                place = self._slot[index] = len(self._out)
                self._out.append(item)
                self._log.append(place)
                self._last_shown = index
            elif item is not None or before is not None:
                shifted = True  # an item appeared before shown ones, or one vanished: places shift
        self._dirty.clear()
        if shifted:
            self._out, self._slot, self._last_shown = [], [-1] * count, -1
            for index, item in enumerate(self._live):
                if item is not None:
                    self._slot[index] = len(self._out)
                    self._out.append(item)
                    self._last_shown = index
            self._new_epoch()
        elif len(self._log) > 2 * len(self._out) + 256:
            self._new_epoch()  # bounds the log: a reader compares everything once, amortized over the entries

    def _key(self, index: int, last: int, *, ended: bool, done: bool) -> tuple[Any, ...]:
        """What element ``index``'s item depends on: equal keys, equal items."""
        kind, value = self._order[index]
        if kind == "text":
            return ("text", value, self._ends.get(index, self._length), done or index < last, done or ended)
        call = self._calls[value]
        if kind == "call":
            status = "in_progress" if call.result is None and not done else ("failed" if call.is_error else "completed")
            return ("call", value, call.version, status)
        return ("result", value, call.version)

    def _build(self, index: int, key: tuple[Any, ...]) -> FrozenDict | None:
        kind, value = self._order[index]
        if kind == "text":
            return self._text_item(value, key[2], closed=key[3], ended=key[4])
        call = self._calls[value]
        card = ask_card.view(call.name, call.args, call.result, is_error=call.is_error)
        if kind == "call":
            return function_call_item(call.call_id, card.name, card.args, status=key[3])
        return function_call_output_item(
            item_id("fco", self.run_id, call.call_id), call.call_id, card.result or "", is_error=call.is_error
        )

    def _text_item(self, start: int, end: int, *, closed: bool, ended: bool) -> FrozenDict | None:
        """A text segment's message item, or None while it shows nothing (blank, or a sentinel; before the
        run's end also a prefix of one)."""
        segment = self._slice(start, end).strip("\n")
        hidden = _silent_at_end(segment) if ended else may_become_silent(segment)
        if hidden:
            return None
        item_id_ = self._text_ids.get(start)
        if item_id_ is None:
            item_id_ = self._text_ids[start] = item_id("msg", self.run_id, f"text:{start}")
        return message_item(item_id_, segment, done=closed)

    @property
    def complete(self) -> bool:
        """The stream saw the whole run: a terminal and no gap."""
        return self.terminal is not None and not self.gaps
