"""The turn renderer and the transcript finalizer, on real Gateway frames and on crafted streams."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from owc.protocol import ChatEvent, EventDecoder, EventFrame, Request, Response, decode_frame, parse_chat_history
from owc.protocol.events import parse_event
from owc.render import (
    SILENT_SENTINELS,
    TurnRenderer,
    apply_events,
    count_cards,
    diff,
    finish,
    output_from_transcript,
    output_text,
    run_error,
    shows_in_transcript,
    transcript_error,
)

from conftest import load_log

CANNED = "Hello from the fake model. This is a canned answer."


def run_events(log: str, conn: str) -> dict[str, list[Any]]:
    """Typed events per run id, as connection ``conn`` received them."""
    decoder = EventDecoder()
    out: dict[str, list[Any]] = {}
    for line in load_log(log):
        frame = line.get("frame")
        if (
            line.get("conn") != conn
            or line.get("dir") != "in"
            or not isinstance(frame, dict)
            or frame.get("type") != "event"
        ):
            continue
        event = decoder.decode(decode_frame(orjson.dumps(frame)))
        run_id = getattr(event, "run_id", None)
        if run_id and frame["event"] in ("chat", "agent", "session.tool"):
            out.setdefault(run_id, []).append(event)
    return out


def history_of(log: str):
    methods: dict[str, str] = {}
    history = None
    for line in load_log(log):
        frame = line.get("frame")
        if not isinstance(frame, dict) or line.get("dir") not in ("in", "out"):
            continue
        f = decode_frame(orjson.dumps(frame))
        if isinstance(f, Request):
            methods[f.id] = f.method
        elif isinstance(f, Response) and methods.get(f.id) == "chat.history":
            history = parse_chat_history(f.payload)
    return history


def render(events: list[Any], run_id: str) -> TurnRenderer:
    renderer = TurnRenderer(run_id)
    for event in events:
        renderer.feed(event)
    return renderer


@pytest.mark.parametrize(
    ("log", "conn", "text", "cards", "state"),
    [
        ("frames.jsonl", "A", CANNED, 0, "final"),
        ("frames.jsonl", "B", CANNED, 0, "final"),
        ("frames_tool.jsonl", "A", CANNED, 1, "final"),
        ("frames_tool.jsonl", "B", CANNED, 1, "final"),
        ("frames_abort.jsonl", "A", "Hello", 0, "aborted"),
        ("frames_abort.jsonl", "B", "Hello", 0, "aborted"),
        ("frames_tool_abort.jsonl", "A", CANNED, 0, "final"),
        ("frames_tool_abort.jsonl", "B", CANNED, 0, "final"),
    ],
)
def test_real_runs_render_and_finalize_alike(log: str, conn: str, text: str, cards: int, state: str) -> None:
    runs = run_events(log, conn)
    history = history_of(log)
    run_id = next(r for r, evs in runs.items() if any(isinstance(e, ChatEvent) and e.is_terminal for e in evs))
    renderer = render(runs[run_id], run_id)
    assert renderer.terminal.state == state and renderer.showable and not renderer.gaps
    streamed = renderer.output(done=True)
    assert output_text(streamed) == text and count_cards(streamed) == cards
    if cards:
        (call,) = [i for i in streamed if i["type"] == "function_call"]
        (result,) = [i for i in streamed if i["type"] == "function_call_output"]
        assert call["name"] == "read" and call["call_id"] == result["call_id"] == "call_fake1"
        assert (
            call["status"] == "failed"
            and result["status"] == "failed"
            and "Validation failed" in result["output"][0]["text"]
        )
        assert [i["type"] for i in streamed] == ["function_call", "function_call_output", "message"]
    finished = finish(renderer, history)
    assert finished.source == "transcript" and finished.complete
    assert finished.content == text and finished.cards == cards  # the transcript agrees with the stream


def test_a_restart_that_drops_the_partial_leaves_the_streamed_copy() -> None:
    """A restart cuts a run mid-reply: the real Gateway (2026.9.6, measured) stores only an empty aborted assistant
    message of the run ("agent run aborted for restart") and drops the partial. The finalize keeps what was
    streamed (before: the transcript's nothing won and the message was finished empty)."""
    runs = run_events("frames_abort.jsonl", "B")
    run_id = next(iter(runs))
    renderer = render(runs[run_id], run_id)
    assert output_text(renderer.output(done=True)) == "Hello"
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {"role": "user", "content": "SLOW reply please", "idempotencyKey": f"{run_id}:user"},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": ""}],
                    "stopReason": "aborted",
                    "errorMessage": "agent run aborted for restart",
                    "__openclaw": {"runId": run_id, "id": "2405a8aa"},
                },
            ],
        }
    )
    finished = finish(renderer, history)
    assert finished.content == "Hello" and finished.source == "stream"


def test_transcript_takes_only_its_own_run() -> None:
    """frames_tool_abort's history holds two runs on one key: each finalize takes only its own."""
    history = history_of("frames_tool_abort.jsonl")
    runs = [m.assistant_run_id for m in history.messages if m.role == "assistant"]
    assert len(set(runs)) == 2
    first, second = runs[0], runs[-1]
    assert output_text(output_from_transcript(history, first)) == CANNED
    assert output_text(output_from_transcript(history, second)) == CANNED
    assert output_from_transcript(history, "some-other-run") is None
    # And with different texts, nothing crosses over.
    raw = {
        "sessionKey": "k",
        "messages": [
            {"role": "user", "content": "a", "idempotencyKey": "r1:user"},
            {"role": "assistant", "content": [{"type": "text", "text": "first answer"}], "__openclaw": {"runId": "r1"}},
            {"role": "user", "content": "b", "idempotencyKey": "r2:user"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "second answer"}],
                "__openclaw": {"runId": "r2"},
            },
        ],
    }
    h = parse_chat_history(raw)
    assert output_text(output_from_transcript(h, "r1")) == "first answer"
    assert output_text(output_from_transcript(h, "r2")) == "second answer"


def chat(
    run: str,
    seq: int,
    state: str,
    *,
    text: str | None = None,
    delta: str | None = None,
    replace: bool = False,
    **extra: Any,
) -> ChatEvent:
    payload: dict[str, Any] = {"runId": run, "sessionKey": "k", "seq": seq, "state": state, **extra}
    if text is not None:
        payload["message"] = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    if delta is not None:
        payload["deltaText"] = delta
    if replace:
        payload["replace"] = True
    return parse_event(EventFrame("chat", payload))


def agent(run: str, seq: int, stream: str, data: dict[str, Any], *, via: str = "agent", heartbeat: bool = False) -> Any:
    return parse_event(
        EventFrame(
            via, {"runId": run, "sessionKey": "k", "seq": seq, "stream": stream, "data": data, "isHeartbeat": heartbeat}
        )
    )


def deltas_of(text: str, cuts: list[int], run: str = "r", start_seq: int = 1) -> list[ChatEvent]:
    points = sorted({c for c in cuts if 0 < c < len(text)}) + [len(text)]
    events, prev = [], 0
    for i, p in enumerate(points):
        events.append(chat(run, start_seq + i, "delta", text=text[:p], delta=text[prev:p]))
        prev = p
    return events


def test_duplicate_and_stale_deltas_never_duplicate_text() -> None:
    r = TurnRenderer("r")
    for e in [
        chat("r", 1, "delta", text="ABC", delta="ABC"),
        chat("r", 1, "delta", text="ABC", delta="ABC"),  # the same delta twice
        chat("r", 2, "delta", text="AB", delta="B"),  # an older, shorter snapshot arriving late
        chat("r", 3, "delta", text="ABCDEF", delta="DEF"),
        chat("r", 2, "delta", text="ABCD", delta="D"),  # out of order
    ]:
        r.feed(e)
    assert r.text == "ABCDEF" and output_text(r.output(done=True)) == "ABCDEF"
    # Without run seqs, the cumulative message alone still protects.
    r2 = TurnRenderer("r")
    for e in [
        chat("r", None, "delta", text="ABC"),
        chat("r", None, "delta", text="ABC"),
        chat("r", None, "delta", text="AB"),
    ]:
        r2.feed(e)
    assert r2.text == "ABC"


def test_replace_replaces() -> None:
    r = TurnRenderer("r")
    r.feed(chat("r", 1, "delta", text="Helo", delta="Helo"))
    r.feed(chat("r", 2, "delta", text="Hello!", delta="Hello!", replace=True))
    assert output_text(r.output(done=True)) == "Hello!"


def test_text_tools_text_interleave() -> None:
    r = TurnRenderer("r")
    r.feed(chat("r", 1, "delta", text="Looking", delta="Looking"))
    r.feed(agent("r", 2, "tool", {"phase": "start", "name": "ls", "toolCallId": "c1", "args": {"path": "/"}}))
    r.feed(
        agent(
            "r",
            3,
            "tool",
            {
                "phase": "result",
                "name": "ls",
                "toolCallId": "c1",
                "isError": False,
                "result": {"content": [{"type": "text", "text": "a b"}]},
            },
        )
    )
    r.feed(chat("r", 4, "delta", text="Looking\n\nFound it", delta="\n\nFound it"))
    r.feed(chat("r", 5, "final", text="Looking\n\nFound it"))
    out = r.output(done=True)
    assert [i["type"] for i in out] == ["message", "function_call", "function_call_output", "message"]
    assert out[0]["content"][0]["text"] == "Looking" and out[3]["content"][0]["text"] == "Found it"
    assert out[1]["arguments"] == '{"path":"/"}' and out[2]["output"] == [{"type": "input_text", "text": "a b"}]
    assert output_text(out) == "Looking\nFound it"  # Open WebUI's own content rule


def test_session_tool_and_item_start_make_cards() -> None:
    r = TurnRenderer("r")
    r.feed(
        agent(
            "r", 1, "item", {"itemId": "tool:c9", "toolCallId": "c9", "name": "exec", "kind": "tool", "phase": "start"}
        )
    )
    assert r.showable and count_cards(r.output()) == 1
    r.feed(
        agent(
            "r",
            2,
            "tool",
            {"phase": "start", "name": "exec", "toolCallId": "c9", "args": {"cmd": "ls"}},
            via="session.tool",
        )
    )
    r.feed(
        agent(
            "r",
            3,
            "tool",
            {"phase": "result", "name": "exec", "toolCallId": "c9", "isError": True, "result": "boom"},
            via="session.tool",
        )
    )
    r.feed(
        agent(
            "r",
            3,
            "tool",
            {"phase": "result", "name": "exec", "toolCallId": "c9", "isError": True, "result": "boom"},
            via="session.tool",
        )
    )
    out = r.output(done=True)
    assert [i["type"] for i in out] == ["function_call", "function_call_output"]
    assert out[0]["arguments"] == '{"cmd":"ls"}' and out[1]["status"] == "failed"


@pytest.mark.parametrize("sentinel", SILENT_SENTINELS)
def test_sentinels_and_their_prefixes(sentinel: str) -> None:
    r = TurnRenderer("r")
    for i in range(1, len(sentinel) + 1):
        r.feed(chat("r", i, "delta", text=sentinel[:i]))
        assert not r.showable and r.output() == []
    r.feed(chat("r", 99, "final", text=sentinel))
    assert r.output(done=True) == [] and not r.showable
    # A text that starts like a sentinel and then diverges is shown.
    r2 = TurnRenderer("r")
    r2.feed(chat("r", 1, "delta", text=sentinel[:2]))
    assert not r2.showable
    r2.feed(chat("r", 2, "delta", text=sentinel[:2] + " problem"))
    assert r2.showable and output_text(r2.output()) == sentinel[:2] + " problem"


#: Short answers that are only the beginning of a sentinel ("NO", "A", "ANNOUNCE"): every proper prefix.
SENTINEL_PREFIXES = sorted({s[:i] for s in SILENT_SENTINELS for i in range(1, len(s))})


@pytest.mark.parametrize("terminal", ["final", "aborted", "error"])
@pytest.mark.parametrize("prefix", SENTINEL_PREFIXES)
def test_a_sentinel_prefix_is_held_while_streaming_and_shown_at_the_end(prefix: str, terminal: str) -> None:
    """A prefix of a sentinel may still become one while the run streams; at the run's terminal it no longer
    can, so a short answer such as ``NO`` is shown (the real Gateway's terminal shows it too:
    ``suppressLeadFragments: false`` in ``emitChatTerminal``). Before, it was never shown."""
    r = TurnRenderer("r")
    r.feed(chat("r", 1, "delta", text=prefix, delta=prefix))
    assert not r.showable and r.output() == []
    r.feed(chat("r", 2, terminal, text=prefix, **({"errorMessage": "boom"} if terminal == "error" else {})))
    assert r.showable
    assert output_text(r.output()) == output_text(r.output(done=True)) == prefix
    assert finish(r, None).content == prefix


def test_a_sentinel_prefix_from_deltas_alone_is_shown_at_a_terminal_without_text() -> None:
    r = TurnRenderer("r")
    r.feed(chat("r", 1, "delta", text="NO", delta="NO"))
    assert not r.showable
    r.feed(chat("r", 2, "final"))  # the terminal carries no message: the deltas' text stands
    assert r.showable and finish(r, None).content == "NO"


@pytest.mark.parametrize("text", ["NO_REPLY", " NO_REPLY\n", "ANNOUNCE_SKIP", "", "\n\n"])
def test_an_exact_sentinel_or_blank_text_stays_hidden_at_the_end(text: str) -> None:
    r = TurnRenderer("r")
    if text:
        r.feed(chat("r", 1, "delta", text=text, delta=text))
    r.feed(chat("r", 2, "final", text=text))
    assert not r.showable and r.output() == [] and r.output(done=True) == []


@pytest.mark.parametrize(("text", "shown"), [("NO", "NO"), ("ANNOUNCE", "ANNOUNCE"), ("NO_REPLY", "")])
def test_a_sentinel_prefix_is_shown_from_the_transcript(text: str, shown: str) -> None:
    """A finalize from the transcript drops only an exact sentinel, like the stream at its end."""
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {"role": "user", "content": "hi", "idempotencyKey": "r:user"},
                {"role": "assistant", "content": [{"type": "text", "text": text}], "__openclaw": {"runId": "r"}},
            ],
        }
    )
    r = TurnRenderer("r")
    r.feed(chat("r", 1, "final", text=text))
    finished = finish(r, history)
    assert finished.source == "transcript" and finished.content == shown


def test_tools_then_sentinel_gives_cards_only() -> None:
    r = TurnRenderer("r")
    r.feed(agent("r", 1, "tool", {"phase": "start", "name": "exec", "toolCallId": "c1", "args": {}}))
    r.feed(
        agent("r", 2, "tool", {"phase": "result", "name": "exec", "toolCallId": "c1", "isError": False, "result": "ok"})
    )
    r.feed(chat("r", 3, "delta", text="NO_REPLY"))
    r.feed(chat("r", 4, "final", text="NO_REPLY"))
    out = r.output(done=True)
    assert r.showable and [i["type"] for i in out] == ["function_call", "function_call_output"]
    assert "NO_REPLY" not in orjson.dumps(out).decode()
    assert finish(r, None).content == ""


def test_a_heartbeat_run_shows_what_the_gateway_shows_of_it() -> None:
    """Issue 24 item 6 (measured on 2026.9.6): a connection that gets a heartbeat run's events at all (one that
    asked ``sessions.messages.subscribe``) gets its lifecycle events flagged ``isHeartbeat``, no deltas, and one
    chat final, with the reply's text, or with no message for a bare ``HEARTBEAT_OK``. The flag hides nothing:
    the final's reply shows, as the Gateway's own chat shows it; an acknowledgement shows nothing, as any
    sentinel. (Before, ``isHeartbeat`` made a run never showable.)"""
    spoke = TurnRenderer("h1")
    spoke.feed(agent("h1", 1, "lifecycle", {"phase": "start"}, heartbeat=True))
    assert not spoke.showable and not spoke.holds_back
    spoke.feed(agent("h1", 2, "lifecycle", {"phase": "end"}, heartbeat=True))
    spoke.feed(chat("h1", 1, "final", text="The build is red."))
    assert spoke.showable
    assert finish(spoke, None).content == "The build is red."
    acked = TurnRenderer("h2")
    acked.feed(agent("h2", 1, "lifecycle", {"phase": "start"}, heartbeat=True))
    acked.feed(agent("h2", 2, "lifecycle", {"phase": "end"}, heartbeat=True))
    acked.feed(chat("h2", 1, "final"))  # measured: no message
    assert not acked.showable and not acked.holds_back
    # A flagged tool start (the Gateway suppresses a heartbeat's tool events, but if one came) is a card as any.
    tooled = TurnRenderer("h3")
    tooled.feed(agent("h3", 1, "tool", {"phase": "start", "name": "exec", "toolCallId": "c1"}, heartbeat=True))
    assert tooled.showable


def test_tool_cards_from_transcript_when_events_were_lost() -> None:
    """ToolCardsFromTranscript: part of the run's events were lost; the finalize takes the transcript's
    cards, and the result says it came from the transcript."""
    r = TurnRenderer("r")
    r.feed(agent("r", 1, "tool", {"phase": "start", "name": "exec", "toolCallId": "c1", "args": {}}))
    r.mark_gap("seq gap")  # c2, c3 and their results were dropped
    r.feed(chat("r", 9, "final", text="All three done"))
    streamed = finish(r, None)
    assert streamed.source == "stream" and not streamed.complete and streamed.cards == 1
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {"role": "user", "content": "go", "idempotencyKey": "r:user"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {}},
                        {"type": "toolCall", "id": "c2", "name": "exec", "arguments": {}},
                    ],
                    "__openclaw": {"runId": "r"},
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "exec",
                    "content": [{"type": "text", "text": "1"}],
                    "isError": False,
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c2",
                    "toolName": "exec",
                    "content": [{"type": "text", "text": "2"}],
                    "isError": False,
                },
                {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": "c3", "name": "read", "arguments": {"path": "x"}}],
                    "__openclaw": {"runId": "r"},
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c3",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "3"}],
                    "isError": True,
                },
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "All three done"}],
                    "__openclaw": {"runId": "r"},
                },
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "a later run"}],
                    "__openclaw": {"runId": "r-later"},
                },
            ],
        }
    )
    finished = finish(r, history)
    assert finished.source == "transcript" and finished.complete
    assert finished.cards == 3 == sum(1 for m in history.messages if m.role == "toolResult")
    assert finished.content == "All three done" and "later" not in finished.content


def test_cli_assistant_and_error_terminal() -> None:
    r = TurnRenderer("R1")
    r.feed(chat("R1", 1, "error", errorMessage="Claude Code process exited with code 143"))
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "partial work"}],
                    "idempotencyKey": "cli-assistant:R1",
                },
            ],
        }
    )
    finished = finish(r, history)
    assert finished.content == "partial work" and finished.error == {
        "content": "Claude Code process exited with code 143"
    }


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60).filter(
    lambda t: not any(s.startswith(t.strip()) for s in SILENT_SENTINELS) and t.strip("\n").strip()
)


@given(
    TEXT,
    st.lists(st.integers(min_value=1, max_value=59), max_size=10),
    st.lists(st.integers(min_value=1, max_value=59), max_size=10),
)
@settings(max_examples=200)
def test_any_chunking_renders_the_same(text: str, cuts_a: list[int], cuts_b: list[int]) -> None:
    a, b = TurnRenderer("r"), TurnRenderer("r")
    for e in deltas_of(text, cuts_a):
        a.feed(e)
    for e in deltas_of(text, cuts_b):
        b.feed(e)
    assert a.output(done=True) == b.output(done=True)
    assert a.text == text


@given(TEXT, st.lists(st.integers(min_value=1, max_value=59), max_size=8), st.data())
@settings(max_examples=200)
def test_replaying_a_delta_changes_nothing(text: str, cuts: list[int], data) -> None:
    events = deltas_of(text, cuts)
    plain = TurnRenderer("r")
    for e in events:
        plain.feed(e)
    replayed = TurnRenderer("r")
    index = data.draw(st.integers(min_value=0, max_value=len(events) - 1))
    for i, e in enumerate(events):
        replayed.feed(e)
        if i >= index:
            replayed.feed(events[index])  # an old delta again, any time later
    assert replayed.output(done=True) == plain.output(done=True)


STEP = st.one_of(
    st.tuples(st.just("text"), st.text(alphabet="abc \n", min_size=1, max_size=8)),
    st.tuples(st.just("tool"), st.booleans()),
    st.tuples(st.just("replace"), st.text(alphabet="abc \n", min_size=0, max_size=12)),
)


@given(st.lists(STEP, min_size=1, max_size=25))
@settings(max_examples=200)
def test_diff_stream_reproduces_the_rendering(steps) -> None:
    r = TurnRenderer("r")
    seq, calls, text = 0, 0, ""
    shown: list[dict[str, Any]] = []
    folded: list[dict[str, Any]] = []
    for kind, value in steps:
        seq += 1
        if kind == "text":
            text += value
            r.feed(chat("r", seq, "delta", text=text, delta=value))
        elif kind == "replace":  # the Gateway rewrote the run's buffer (shorter, longer or different)
            text = value
            r.feed(chat("r", seq, "delta", text=text, delta=value, replace=True))
        else:
            calls += 1
            r.feed(agent("r", seq, "tool", {"phase": "start", "name": "t", "toolCallId": f"c{calls}", "args": {}}))
            if value:
                seq += 1
                r.feed(
                    agent(
                        "r",
                        seq,
                        "tool",
                        {"phase": "result", "name": "t", "toolCallId": f"c{calls}", "isError": False, "result": "ok"},
                    )
                )
        now = r.output()
        ids_now = [item["id"] for item in now]
        assert len(ids_now) == len(set(ids_now))  # no item twice (the old pipe's duplicated text)
        d = diff(shown, now)
        events = list(d.events) + ([{"type": "chat:completion", "data": {"output": now}}] if d.needs_snapshot else [])
        folded = apply_events(folded, events)
        shown = now
        assert folded == now
    final = r.output(done=True)
    d = diff(shown, final)
    folded = apply_events(
        folded, list(d.events) + ([{"type": "chat:completion", "data": {"output": final}}] if d.needs_snapshot else [])
    )
    assert folded == final


def test_aborted_partial_after_a_tool_does_not_repeat_text() -> None:
    """The Gateway's aborted partial is its run-wide buffer; the text an earlier message holds is not repeated."""
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "First part."},
                        {"type": "toolCall", "id": "c1", "name": "ls", "arguments": {}},
                    ],
                    "__openclaw": {"runId": "r"},
                },
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "ls",
                    "content": [{"type": "text", "text": "x"}],
                    "isError": False,
                    "__openclaw": None,
                },
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "First part.\n\nSecond, cut"}],
                    "idempotencyKey": "r:assistant",
                    "openclawAbort": {"aborted": True, "origin": "rpc", "runId": "r"},
                },
            ],
        }
    )
    out = output_from_transcript(history, "r")
    assert [i["type"] for i in out] == ["message", "function_call", "function_call_output", "message"]
    assert output_text(out) == "First part.\nSecond, cut"


def test_an_aborted_item_that_starts_with_the_earlier_text_is_kept_whole() -> None:
    """The real Gateway's transcript of "Hello", a tool call, then "Hello from" stopped (measured on 2026.9.6 by
    the conformance tier; ``chat.history`` shows the first model turn as two messages with one id). The partial
    is the run-wide buffer; only the earlier message's text is cut from its start, not a word of the new item."""
    run = {"runId": "r", "id": "turn-1"}
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {"role": "user", "content": "ECHO_TOOL SLOW", "idempotencyKey": "r:user"},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello"}], "__openclaw": run},
                {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": "call_fake1", "name": "read", "arguments": {}}],
                    "stopReason": "toolUse",
                    "__openclaw": run,
                },
                {
                    "role": "toolResult",
                    "toolCallId": "call_fake1",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "Validation failed"}],
                    "isError": True,
                    "__openclaw": {"runId": "r"},
                },
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Hello\n\nHello from"}],
                    "stopReason": "stop",
                    "idempotencyKey": "r:assistant",
                    "openclawAbort": {"aborted": True, "origin": "rpc", "runId": "r"},
                    "__openclaw": {"runId": "r", "idempotencyKey": "r:assistant"},
                },
            ],
        }
    )
    out = output_from_transcript(history, "r")
    assert [i["type"] for i in out] == ["message", "function_call", "function_call_output", "message"]
    assert output_text(out) == "Hello\nHello from"


def test_a_shortening_replace_never_duplicates_segments() -> None:
    r = TurnRenderer("r")
    r.feed(chat("r", 1, "delta", text="Hello world"))
    r.feed(agent("r", 2, "tool", {"phase": "start", "name": "ls", "toolCallId": "c1", "args": {}}))
    r.feed(chat("r", 3, "delta", text="Hello world\n\nMore text"))
    r.feed(chat("r", 4, "delta", text="Hi", replace=True))
    out = r.output(done=True)
    assert output_text(out) == "Hi" and len({i["id"] for i in out}) == len(out)
    r.feed(chat("r", 5, "delta", text="Hi there"))
    out = r.output(done=True)
    assert output_text(out).replace("\n", "") == "Hi there" and len({i["id"] for i in out}) == len(out)


def _window(messages: list[dict[str, Any]], has_more: bool) -> Any:
    return parse_chat_history(
        {
            "sessionKey": "k",
            "messages": messages,
            "hasMore": has_more,
            "nextOffset": len(messages) if has_more else None,
        }
    )


def test_reaches_run_start() -> None:
    from owc.render import reaches_run_start

    user = {"role": "user", "content": "go", "idempotencyKey": "R:user"}
    call = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c", "name": "x", "arguments": {}}],
        "__openclaw": {"runId": "R"},
    }
    result = {"role": "toolResult", "toolCallId": "c", "toolName": "x", "content": "ok", "isError": False}
    other = {"role": "assistant", "content": "earlier", "__openclaw": {"runId": "Q"}}
    assert reaches_run_start(_window([call, result], has_more=False), "R")  # nothing older exists
    assert reaches_run_start(_window([user, call, result], has_more=True), "R")  # R's user turn is in it
    assert reaches_run_start(_window([other, call, result], has_more=True), "R")  # an older run precedes R
    assert not reaches_run_start(_window([call, result], has_more=True), "R")  # R may go on before the page
    assert not reaches_run_start(_window([other], has_more=True), "R")  # R is not in the window at all


def test_a_shortening_replace_then_another_tool_does_not_repeat_text() -> None:
    r = TurnRenderer("r")
    for e in (
        chat("r", 1, "delta", text="Hello", delta="Hello"),
        agent("r", 2, "tool", {"phase": "start", "name": "t", "toolCallId": "c1", "args": {}}),
        chat("r", 3, "delta", text="Hello\n\nWorld", delta="\n\nWorld"),
        chat("r", 4, "delta", text="Hi", delta="Hi", replace=True),
        agent("r", 5, "tool", {"phase": "start", "name": "t", "toolCallId": "c2", "args": {}}),
        chat("r", 6, "delta", text="Hi there", delta=" there"),
    ):
        r.feed(e)
    out = r.output(done=True)
    assert [i["type"] for i in out] == ["message", "function_call", "function_call", "message"]
    assert output_text(out).replace("\n", "") == "Hi there"
    assert len({i["id"] for i in out}) == len(out)


def test_odd_tool_result_parts_are_shown_not_fatal() -> None:
    r = TurnRenderer("r")
    r.feed(agent("r", 1, "tool", {"phase": "start", "name": "t", "toolCallId": "c1", "args": {}}))
    odd = {"content": [{"type": "text", "text": None}, {"type": "text", "text": 42}, {"type": "text", "text": "ok"}]}
    assert r.feed(
        agent("r", 2, "tool", {"phase": "result", "name": "t", "toolCallId": "c1", "isError": False, "result": odd})
    )
    (result,) = [i for i in r.output(done=True) if i["type"] == "function_call_output"]
    assert result["output"][0]["text"] == "42ok"


def test_a_transcript_that_cannot_be_rendered_falls_back_to_the_stream(monkeypatch) -> None:
    import owc.render.transcript as transcript

    r = TurnRenderer("r")
    for e in (chat("r", 1, "delta", text="Streamed.", delta="Streamed."), chat("r", 1, "final", text="Streamed.")):
        r.feed(e)

    def broken(history, run_id):
        raise TypeError("an unexpected transcript shape")

    monkeypatch.setattr(transcript, "output_from_transcript", broken)
    history = parse_chat_history({"sessionKey": "k", "messages": []})
    finished = transcript.finish(r, history)
    assert (finished.source, finished.content, finished.complete) == ("stream", "Streamed.", True)


def test_tool_call_ids_reused_across_runs_keep_their_own_results() -> None:
    """A model that says ``call_1`` in every run: each run's card shows its own result (issue 11)."""
    from owc.protocol import parse_chat_history
    from owc.render import output_from_transcript

    def turn(run: str, result: str) -> list[dict]:
        call = {"type": "toolCall", "id": "call_1", "name": "exec", "arguments": {}}
        return [
            {"role": "user", "content": "go", "idempotencyKey": f"{run}:user"},
            {"role": "assistant", "content": [call], "__openclaw": {"runId": run}},
            {
                "role": "toolResult",
                "toolCallId": "call_1",
                "toolName": "exec",
                "content": result,
                "__openclaw": {"runId": run},
            },
            {"role": "assistant", "content": [{"type": "text", "text": f"{run} done"}], "__openclaw": {"runId": run}},
        ]

    history = parse_chat_history(
        {"sessionKey": "k", "messages": turn("r1", "first result") + turn("r2", "second result")}
    )
    for run, result in (("r1", "first result"), ("r2", "second result")):
        outputs = [i for i in output_from_transcript(history, run) if i["type"] == "function_call_output"]
        assert len(outputs) == 1 and result in str(outputs[0]["output"]), run


def test_a_call_id_reused_within_one_run_gets_a_card_per_call_live_and_from_the_transcript() -> None:
    """A model that says ``call_1`` for every call of one run (fuzzer, seed 6582): live, the second start of an
    answered ``call_1`` is a new card (it was merged into the first), and the transcript keys the same cards the
    same way, each with its own result."""
    from owc.protocol import parse_chat_history
    from owc.render import output_from_transcript

    r = TurnRenderer("R")
    for seq, phase, extra in ((1, "start", {"args": {"i": 1}}), (2, "result", {"result": "one"})):
        r.feed(agent("R", seq, "tool", {"phase": phase, "name": "exec", "toolCallId": "call_1", **extra}))
    r.feed(agent("R", 2, "tool", {"phase": "result", "name": "exec", "toolCallId": "call_1", "result": "one"}))
    for seq, phase, extra in ((3, "start", {"args": {"i": 2}}), (4, "result", {"result": "two"})):
        r.feed(agent("R", seq, "tool", {"phase": phase, "name": "exec", "toolCallId": "call_1", **extra}))
    live = r.output(done=True)
    assert [(i["type"], i["call_id"]) for i in live] == [
        ("function_call", "call_1"),
        ("function_call_output", "call_1"),
        ("function_call", "call_1#2"),
        ("function_call_output", "call_1#2"),
    ]
    assert [i["output"][0]["text"] for i in live if i["type"] == "function_call_output"] == ["one", "two"]

    def call(i: int) -> dict[str, Any]:
        part = {"type": "toolCall", "id": "call_1", "name": "exec", "arguments": {"i": i}}
        return {"role": "assistant", "content": [part], "__openclaw": {"runId": "R"}}

    def result(text: str) -> dict[str, Any]:
        return {"role": "toolResult", "toolCallId": "call_1", "toolName": "exec", "content": text}

    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {"role": "user", "content": "go", "idempotencyKey": "R:user"},
                call(1),
                result("one"),
                call(2),
                result("two"),
            ],
        }
    )
    final = output_from_transcript(history, "R")
    assert [(i["type"], i["call_id"]) for i in final] == [(i["type"], i["call_id"]) for i in live]
    assert [i["output"][0]["text"] for i in final if i["type"] == "function_call_output"] == ["one", "two"]


def test_a_stale_delta_after_the_final_changes_nothing() -> None:
    """A delta that arrives after the run's final (reordered, or replayed) must not replace the final text in the
    stream copy (issue 11)."""
    from owc.protocol import ChatEvent
    from owc.render import TurnRenderer

    def chat(state: str, text: str, seq: int, delta: str | None = None) -> ChatEvent:
        message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        return ChatEvent(run_id="r", session_key="k", state=state, run_seq=seq, message=message, delta_text=delta)

    renderer = TurnRenderer("r")
    renderer.feed(chat("delta", "Hello wor", 1, "Hello wor"))
    renderer.feed(chat("final", "Hello world.", 2))
    renderer.feed(chat("delta", "Hello there", 3, "there"))
    assert renderer.text == "Hello world."
    assert [i["content"][0]["text"] for i in renderer.output(done=True) if i["type"] == "message"] == ["Hello world."]


@pytest.mark.parametrize(
    ("text", "silent"),
    [
        ("NO_REPLY", True),
        ("no_reply", True),
        ("  NO_REPLY NO_REPLY \n", True),
        ("NO_REPLY.", True),
        ("**ANNOUNCE_SKIP**", True),
        ("REPLY_SKIP", True),
        ("HEARTBEAT_OK", True),
        ("NO_REPLY, but here is why", False),
        ("No reply.", False),
        ("NO_REPLY ANNOUNCE_SKIP", False),
        ("", False),
    ],
)
def test_the_silent_rule_is_the_real_gateways(text: str, silent: bool) -> None:
    """``isSilentReplyText`` over ``NON_DELIVERABLE_REPLY_TOKENS`` (OpenClaw 2026.9.6, src/auto-reply/tokens.ts):
    any case, repeated, wrapped in punctuation. Before, owc knew only exact ``NO_REPLY`` and ``ANNOUNCE_SKIP``,
    so a finalize from the transcript could show "REPLY_SKIP" or "NO_REPLY." as a message."""
    from owc.render.sentinels import is_silent

    assert is_silent(text) is silent


def _stored(role: str, seq: int, content: Any, **extra: Any) -> dict[str, Any]:
    meta = extra.pop("meta", {})
    return {"role": role, "content": content, **extra, "__openclaw": {"seq": seq, **meta}}


def test_a_heartbeats_reply_in_the_transcript_is_shown_wherever_it_stands() -> None:
    """chat.history (real Gateway 2026.9.6) hides a heartbeat runner's prompt and a bare ``HEARTBEAT_OK``, marks the
    next message shown ``turnBoundary`` and shows the reply of a heartbeat that speaks: owc's finalize from the
    transcript shows it as any run's, whatever lies hidden before it (issue 24 item 6). Before, a marked reply
    with exactly one hidden message before it (H1) was taken for a heartbeat's and given no message, while one
    after a silent heartbeat (H3, three hidden before it) was shown: the same kind of run, two outcomes."""
    before = _stored("assistant", 4, "Earlier answer.", meta={"runId": "Q"})
    # seq 5 (H1's prompt) is hidden; its reply is marked.
    h1 = _stored("assistant", 6, "All quiet.", meta={"runId": "H1", "turnBoundary": True})
    # seq 7-9 (H2's prompt, H2's HEARTBEAT_OK, H3's prompt) are hidden; H3's reply is marked.
    h3 = _stored("assistant", 10, "Still quiet.", meta={"runId": "H3", "turnBoundary": True})
    window = _window([before, h1, h3], has_more=False)
    assert output_text(output_from_transcript(window, "H1") or []) == "All quiet."
    assert output_text(output_from_transcript(window, "H3") or []) == "Still quiet."
    # H2 left nothing shown: no output, so no message. Were its acknowledgement in the window, it would still
    # show nothing (a sentinel).
    assert output_from_transcript(window, "H2") is None
    ack = _stored("assistant", 8, "HEARTBEAT_OK", meta={"runId": "H2"})
    assert not output_from_transcript(_window([before, h1, ack, h3], has_more=False), "H2")


# --- issue 24 item 2: a run's error from the transcript (measured on 2026.9.6,
# docs/reference/gateway-errors-heartbeats-internal.md) ---------------------------------------------------------

#: The live error terminal's first ``errorMessage`` and the row's ``lastRunError`` (equal, measured) ...
LIVE_400 = "LLM request failed: provider rejected the request schema or tool payload."
#: ... and the copy ``chat.history`` puts in the run's terminal error record instead (other words, measured).
COPY_400 = "⚠️ LLM request failed (request format rejected, HTTP 400)."
COPY_500 = "⚠️ LLM request failed (provider internal error). This is usually temporary — try again shortly."


def failed_history(run: str, text: str) -> Any:
    """R's user turn and the Gateway's terminal error record of R, as ``chat.history`` shows them."""
    return parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {"role": "user", "content": "FAIL please", "idempotencyKey": f"{run}:user"},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "stopReason": "error",
                    "idempotencyKey": f"{run}:terminal-error",
                    "__openclaw": {"runId": run, "idempotencyKey": f"{run}:terminal-error", "seq": 2},
                },
            ],
        }
    )


def test_a_run_that_failed_unseen_shows_its_error_from_the_transcript() -> None:
    """No terminal reached owc (it was away, or the error fell in a gap): the transcript's record decides, and
    its copy of the failure is the error, never reply text (before: the copy was the message's content and the
    message had no error)."""
    finished = finish(TurnRenderer("R1"), failed_history("R1", COPY_400))
    assert (finished.content, finished.error) == ("", {"content": COPY_400})
    assert transcript_error(failed_history("R1", COPY_400), "R1") == COPY_400
    assert shows_in_transcript(failed_history("R1", COPY_400), "R1")


def test_a_failed_runs_partial_text_stays_its_content() -> None:
    """An error after streamed text: the record holds the copy, a blank line, then the partial (measured)."""
    history = failed_history("R1", f"{COPY_500}\n\nHello from the")
    finished = finish(TurnRenderer("R1"), history)
    assert (finished.content, finished.error) == ("Hello from the", {"content": COPY_500})


def test_the_row_gives_a_missed_error_the_live_words() -> None:
    """The session row's ``lastRunError`` (passed while its ``lastRunId`` is R) is what the live terminal said."""
    finished = finish(TurnRenderer("R1"), failed_history("R1", COPY_400), row_error=LIVE_400)
    assert finished.error == {"content": LIVE_400} and finished.content == ""
    assert run_error(TurnRenderer("R1"), None, LIVE_400) == {"content": LIVE_400}


def test_a_live_terminal_decides_the_error() -> None:
    """Seen live, the terminal's words stand (and its copy in the transcript is not shown twice as text); a
    final or aborted terminal is no error whatever the row says."""
    live = TurnRenderer("R1")
    live.feed(chat("R1", 1, "error", errorMessage=LIVE_400))
    finished = finish(live, failed_history("R1", COPY_400), row_error="something else")
    assert (finished.content, finished.error) == ("", {"content": LIVE_400})
    ended = TurnRenderer("R1")
    ended.feed(chat("R1", 1, "final", text="fine"))
    assert run_error(ended, failed_history("R1", COPY_400), "old error") is None


def test_only_the_runs_own_last_message_says_it_failed() -> None:
    """Another run's record is not R's, and a run whose record a later message of its own follows (a retry
    that recovered) did not fail."""
    assert transcript_error(failed_history("R1", COPY_400), "R2") is None
    recovered = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                *(dict(m.raw) for m in failed_history("R1", COPY_400).messages),
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "stop",
                 "__openclaw": {"runId": "R1"}},
            ],
        }
    )  # fmt: skip
    assert transcript_error(recovered, "R1") is None
    assert finish(TurnRenderer("R1"), recovered).content == "ok"
