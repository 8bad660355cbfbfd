"""The incremental renderer and diff (issue 16) against the full ones they replace.

A writer used to rebuild the run's whole item list and diff it against the last one on every flush; now the
renderer keeps its items and logs what changed, and ``Shown`` diffs only that. The tabs must not notice: for any
stream of events and any flush points, the events emitted and the live copies saved are exactly those of the old
writer (``tests/render_reference.py``, the code of main before the change), and so are the final outputs.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import render_reference as old
from hypothesis import given, settings
from hypothesis import strategies as st

from owc.protocol import EventFrame
from owc.protocol.events import parse_event
from owc.render import Shown, TurnRenderer, apply_events, diff, diff_at
from owc.render.sentinels import SILENT_SENTINELS

# Pieces that make sentinels, prefixes of them, blank segments and plain text when joined.
PIECE = st.sampled_from(
    ["Hi", " there", "a", " b", "NO", "_REPLY", "NO_REPLY", "\n", "\n\n", "x\n", "HEARTBEAT_OK", " ", "Ok."]
)
TEXT = st.lists(PIECE, max_size=4).map("".join)
CALL = st.sampled_from(["c1", "c2", "c3"])
RESULT = st.one_of(st.none(), st.sampled_from(["ok", "", "[chat.history omitted: message too large]"]))
PREFIX = st.one_of(
    st.none(),
    st.just([]),
    st.lists(
        st.builds(
            lambda n, t: {
                "type": "message",
                "id": f"p{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": t}],
            },
            st.integers(0, 3),
            TEXT,
        ),
        min_size=1,
        max_size=2,
        unique_by=lambda i: i["id"],
    ),
)

DELTA = st.tuples(st.just("delta"), PIECE)
FLUSH = st.tuples(st.just("flush"), st.just(None))
START = st.tuples(st.just("start"), CALL, st.booleans(), st.sampled_from(["agent", "session.tool"]))
RESULT_STEP = st.tuples(st.just("result"), CALL, st.booleans(), RESULT)
STEP = st.one_of(
    # The common steps weigh more (``one_of`` picks a branch uniformly): text, cards, flushes.
    DELTA,
    DELTA,
    DELTA,
    DELTA,
    FLUSH,
    FLUSH,
    FLUSH,
    START,
    START,
    RESULT_STEP,
    RESULT_STEP,
    st.tuples(st.just("delta_only"), PIECE),  # deltaText without the cumulative message
    st.tuples(st.just("skipped"), PIECE, PIECE),  # a delta lost: the next one's message is longer than said
    st.tuples(st.just("replace"), TEXT),
    st.tuples(st.just("stale"), st.integers(0, 5)),  # an older delta again
    st.tuples(st.just("item"), CALL),
    st.tuples(st.just("args"), CALL),  # a start again with arguments: a call's late ones, or a reused id
    st.tuples(st.just("terminal"), st.sampled_from(["final", "error", "aborted"]), st.booleans()),
    st.tuples(st.just("lifecycle"), st.sampled_from(["end", "error"])),
    st.tuples(st.just("heartbeat"), st.just(None)),
    st.tuples(st.just("gap"), st.just(None)),
    st.tuples(st.just("old_agent_seq"), CALL),
    st.tuples(st.just("prefix"), PREFIX),  # a continuation's earlier output shown first (a new list)
    st.tuples(st.just("takeover"), st.just(None)),  # another writer starts on the run: a snapshot first
)


class Stream:
    """Typed events as a Gateway (or a hostile one) would send them for run ``r``."""

    def __init__(self) -> None:
        self.seq = 0
        self.text = ""
        self.sent: list[Any] = []

    def chat(self, state: str, *, text: str | None, delta: str | None, replace: bool = False, **extra: Any) -> Any:
        self.seq += 1
        payload: dict[str, Any] = {"runId": "r", "sessionKey": "k", "seq": self.seq, "state": state, **extra}
        if text is not None:
            payload["message"] = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        if delta is not None:
            payload["deltaText"] = delta
        if replace:
            payload["replace"] = True
        event = parse_event(EventFrame("chat", payload))
        self.sent.append(event)
        return event

    def agent(self, stream: str, data: dict[str, Any], *, via: str = "agent", seq: int | None = None) -> Any:
        if seq is None:
            self.seq += 1
            seq = self.seq
        payload = {"runId": "r", "sessionKey": "k", "seq": seq, "stream": stream, "data": data}
        return parse_event(EventFrame(via, payload))

    def events(self, step: tuple[Any, ...]) -> list[Any]:
        kind = step[0]
        if kind == "delta":
            self.text += step[1]
            return [self.chat("delta", text=self.text, delta=step[1])]
        if kind == "delta_only":
            self.text += step[1]
            return [self.chat("delta", text=None, delta=step[1])]
        if kind == "skipped":
            self.text += step[1] + step[2]
            return [self.chat("delta", text=self.text, delta=step[2])]
        if kind == "replace":
            self.text = step[1]
            return [self.chat("delta", text=self.text, delta=step[1], replace=True)]
        if kind == "stale":
            chats = [e for e in self.sent if e.state == "delta"]
            return [chats[-1 - step[1] % len(chats)]] if chats else []
        if kind == "start":
            _, call, with_args, via = step
            data = {"phase": "start", "name": "t", "toolCallId": call, **({"args": {"q": call}} if with_args else {})}
            return [self.agent("tool", data, via=via)]
        if kind == "result":
            _, call, is_error, result = step
            data = {"phase": "result", "name": "t", "toolCallId": call, "isError": is_error, "result": result}
            return [self.agent("tool", data)]
        if kind == "item":
            return [self.agent("item", {"kind": "tool", "phase": "start", "toolCallId": step[1], "name": "t"})]
        if kind == "args":
            data = {"phase": "start", "name": "t", "toolCallId": step[1], "args": {"late": True}}
            return [self.agent("tool", data)]
        if kind == "old_agent_seq":
            data = {"phase": "result", "name": "t", "toolCallId": step[1], "isError": False, "result": "late"}
            return [self.agent("tool", data, seq=max(0, self.seq - 3))]
        if kind == "terminal":
            _, state, with_text = step
            extra = {"errorMessage": "boom"} if state == "error" else {}
            return [self.chat(state, text=self.text if with_text else None, delta=None, **extra)]
        if kind == "lifecycle":
            return [self.agent("lifecycle", {"phase": step[1]})]
        if kind == "heartbeat":
            self.seq += 1
            payload = {"runId": "r", "sessionKey": "k", "seq": self.seq, "stream": "assistant", "data": {}}
            return [parse_event(EventFrame("agent", {**payload, "isHeartbeat": True}))]
        return []


class OldWriter:
    """The writer's flush before issue 16: the whole output, compared and diffed whole."""

    def __init__(self, renderer: old.TurnRenderer, snapshot_first: bool) -> None:
        self.renderer = renderer
        self.shown: list[dict[str, Any]] = []
        self.snapshot_first = snapshot_first

    def flush(self, prefix: list[dict[str, Any]] | None) -> list[Any]:
        own_ = self.renderer.output()
        now = [*prefix, *own_] if prefix else own_
        if now == self.shown and not self.snapshot_first:
            return []
        told: list[Any] = []
        if self.snapshot_first:
            self.snapshot_first = False
            told.append(old.snapshot_event(now))
        else:
            d = old.diff(self.shown, now)
            told.extend(d.events)
            if d.needs_snapshot:
                told.append(old.snapshot_event(now))
        self.shown = now
        told.append(("save", copy.deepcopy(now)))
        return told


class NewWriter:
    """The writer's flush now (``owc.runs.writer._Writer._flush``)."""

    def __init__(self, renderer: TurnRenderer, snapshot_first: bool) -> None:
        self.renderer = renderer
        self.shown = Shown()
        self.snapshot_first = snapshot_first

    def flush(self, prefix: list[dict[str, Any]] | None) -> list[Any]:
        flush = self.shown.flush(self.renderer, prefix, snapshot=self.snapshot_first)
        if flush is None:
            return []
        self.snapshot_first = False
        return [*flush.events, ("save", flush.output)]


def play(steps: list[tuple[Any, ...]], snapshot_first: bool) -> None:
    stream = Stream()
    a, b = old.TurnRenderer("r"), TurnRenderer("r")
    wa, wb = OldWriter(a, snapshot_first), NewWriter(b, snapshot_first)
    prefix: list[dict[str, Any]] | None = None
    folded: list[dict[str, Any]] = []
    for step in steps:
        kind = step[0]
        if kind == "flush":
            told_a, told_b = wa.flush(prefix), wb.flush(prefix)
            assert told_b == told_a
            events = [e for e in told_b if not isinstance(e, tuple)]
            folded = apply_events(folded, events)
            if told_b:
                assert folded == told_b[-1][1]  # the tabs hold what the live copy holds
        elif kind == "prefix":
            prefix = copy.deepcopy(step[1])
        elif kind == "takeover":
            wa, wb = OldWriter(a, True), NewWriter(b, True)
        elif kind == "gap":
            a.mark_gap("test")
            b.mark_gap("test")
        else:
            for event in stream.events(step):
                assert b.feed(event) == a.feed(event)
        assert b.version == a.version
    assert wb.flush(prefix) == wa.flush(prefix)
    assert b.output() == a.output()
    assert b.output(done=True) == a.output(done=True)
    assert b.text == a.text and b.showable == a.showable and b.holds_back == a.holds_back


@given(st.lists(STEP, max_size=60), st.booleans())
@settings(max_examples=600, deadline=None, derandomize=True)
def test_incremental_flushes_emit_exactly_what_the_full_diff_did(steps, snapshot_first) -> None:
    play(steps, snapshot_first)


@given(st.lists(STEP, max_size=12), st.booleans())
@settings(max_examples=400, deadline=None, derandomize=True)
def test_incremental_flushes_on_short_streams(steps, snapshot_first) -> None:
    play(steps, snapshot_first)


def test_a_long_run_flushed_after_every_event() -> None:
    """The bench's run shape (text, then a call and its result, again and again), flushed after every event, with
    the log bound (a new epoch every ~2 x items + 256 changes) crossed many times."""
    steps: list[tuple[Any, ...]] = []
    for n in range(60):
        steps += [("delta", f"w{n} "), ("flush", None)] * 7
        steps += [("start", f"c{n}", True, "agent"), ("flush", None), ("result", f"c{n}", False, "ok"), ("flush", None)]
    steps += [("terminal", "final", True), ("flush", None)]
    play(steps, False)


F = ("flush", None)


@pytest.mark.parametrize(
    "steps",
    [
        # A shown segment grows into a repeated sentinel and vanishes: the places shift (a snapshot).
        [("delta", "NO_REPLY"), F, ("delta", " N"), F, ("delta", "O_REPLY"), F, ("delta", " and more"), F],
        # A card shown without arguments gets them late.
        [("start", "c1", False, "agent"), F, ("delta", "Hi"), F, ("args", "c1"), F, ("result", "c1", False, "ok"), F],
        # A held-back "NO" before a card is shown at the run's end: an item appears before shown ones.
        [("delta", "NO"), F, ("start", "c1", True, "agent"), ("delta", "Hi"), F, ("terminal", "final", True), F],
        # A replacement that shortens the text across segments, and one that rewrites it.
        [
            ("delta", "Hi"),
            ("start", "c1", True, "agent"),
            ("delta", " there"),
            F,
            ("replace", "H"),
            F,
            ("delta", "x"),
            F,
        ],
        [("delta", "Hi"), F, ("replace", "Ok."), F, ("delta", " b"), F, ("replace", "Ok. b and more"), F],
        # A delta was lost: the next message is longer than its delta says (the text is set, not appended).
        [("delta", "Hi"), F, ("skipped", " b", "Ok."), F, ("start", "c2", True, "session.tool"), F],
        # A reused call id after its result, an agent event with an old seq, a heartbeat, a takeover.
        [("start", "c1", True, "agent"), ("result", "c1", True, "ok"), F, ("start", "c1", True, "agent"), F]
        + [("old_agent_seq", "c1"), ("heartbeat", None), F, ("takeover", None), F, ("result", "c1", False, None), F],
    ],
)
def test_incremental_flushes_in_the_cases_that_shift_places(steps) -> None:
    play(steps, False)


@given(st.lists(st.sampled_from([" ", "\n", "NO_REPLY", "x", "a" * 100, " " * 70, "no_re"]), max_size=12).map("".join))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_the_sentinel_rule_for_long_texts_is_unchanged(text: str) -> None:
    from owc.render.sentinels import may_become_silent

    assert may_become_silent(text) == old.may_become_silent(text)


SENTINEL_CHARS = (
    "".join(SILENT_SENTINELS).lower()
    + "".join(SILENT_SENTINELS)
    + " \n\t.!?,;:-\u2026\u00bf\u212a\u017f\u0131\u0130\u00e9\u00df0129w_\u203f"
)


@given(
    st.one_of(
        st.text(alphabet=SENTINEL_CHARS, max_size=40),
        st.lists(
            st.sampled_from([*SILENT_SENTINELS, *(t.lower() for t in SILENT_SENTINELS), " ", ".", "!", "\u212a", "x"]),
            max_size=5,
        ).map("".join),
        st.text(max_size=30),
    )
)
@settings(max_examples=1000, deadline=None, derandomize=True)
def test_the_sentinel_rule_is_unchanged(text: str) -> None:
    from owc.render.sentinels import is_silent, may_become_silent

    assert is_silent(text) == old.is_silent(text)
    assert may_become_silent(text) == old.may_become_silent(text)


def test_diff_at_gives_diffs_events_for_the_places_that_changed() -> None:
    a = [{"type": "function_call", "id": "c1", "status": "in_progress"}]
    b = [{"type": "function_call", "id": "c1", "status": "completed"}, {"type": "function_call", "id": "c2"}]
    assert diff_at(a, b, [0]) == diff(a, b)
    assert diff_at(b, a, [0]).needs_snapshot  # shorter: an item vanished
    assert diff_at(a, [{"type": "function_call", "id": "c9"}], [0]).needs_snapshot  # another item in its place
