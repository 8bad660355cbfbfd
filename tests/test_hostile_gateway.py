"""Hostile or odd input from the Gateway (issue 11): bad input gets a clear log line and costs only itself; it
never kills the connection or other runs.

Each test runs owc against the simulator (a real handshake, real runs and transcripts) with frames rewritten
or injected on the wire (``tests/hostile.py``), and checks the good runs end as finished messages with their
whole text while owc keeps its one connection.
"""

from __future__ import annotations

import uuid

import orjson
import pytest
from hostile import (
    LONE,
    Hostile,
    Recorder,
    Wire,
    envelope_frames,
    nested,
    owc_deaths,
    payload_frames,
    refused_frames,
)

from owc import ids
from owc.protocol import DEFAULT_MAX_PAYLOAD, decode_frame, older_page, parse_chat_history, repair_json
from owc.rules.lifecycle import State
from owc.runs import writer as writer_module
from owc.sim import rpc as sim_rpc
from owc.sim.script import Hold, Text

from harness import open_env

REPLACEMENT = "\ufffd"


def _text_of(message: dict) -> str:
    return message["content"]


# ---------------------------------------------------------------------------------------- lone surrogates


def test_a_lone_surrogate_is_replaced_not_refused() -> None:
    frame = decode_frame(
        '{"type":"event","event":"chat","payload":{"t":"a\\ud83d b \\ud83d\\ude00 \\\\ud83d \\udc00"}}'
    )
    assert frame.payload["t"] == f"a{REPLACEMENT} b \U0001f600 \\ud83d {REPLACEMENT}"
    # The fast path is untouched: a valid frame is not rewritten.
    assert repair_json(b'{"a":"\\ud83d\\ude00"}') == (b'{"a":"\\ud83d\\ude00"}', [])


def test_the_depth_repair_is_bounded() -> None:
    """Past orjson's 1,024 levels a frame is cut at 512; the scan is Python-speed, so a frame over 256 KiB
    nested that deep is refused rather than scanned (a hostile frame cannot stall the reader for seconds)."""
    cut, repairs = repair_json(b'{"a":' + b"[" * 3000 + b"]" * 3000 + b"}")
    assert repairs == ["too_deep"] and orjson.loads(cut)
    assert repair_json(b"[" * 200_000 + b"]" * 200_000) == (b"[" * 200_000 + b"]" * 200_000, [])
    # A frame orjson reads (1,000 levels) is never rewritten.
    assert repair_json(b"[" * 1000 + b"]" * 1000)[1] == []


def test_invalid_utf8_and_a_bom_are_repaired() -> None:
    assert decode_frame(b'{"type":"event","event":"x\xff"}').event == f"x{REPLACEMENT}"
    assert decode_frame(b'\xef\xbb\xbf{"type":"event","event":"tick"}').event == "tick"


async def test_a_lone_surrogate_in_a_run_keeps_the_run(tmp_path, clock, monkeypatch, caplog) -> None:
    """Before, orjson refused every frame that carried the run's cumulative text from the surrogate on (the
    message stored "Before "), and the finalize's ``chat.history`` reply too: it waited 60 s for it."""
    wire = Wire(monkeypatch)
    lone = wire.string("LONE", LONE)
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "surrogate").text(
            f"Before {lone} after.", chunks=["Before ", f"{lone} af", "ter."]
        ).end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "surrogate")]
        assert message["done"] and _text_of(message) == f"Before {REPLACEMENT} after."
        assert env.clients["A"].connections_opened == 1
        assert owc_deaths(caplog.records) == []
    assert any("protocol.frame_repaired repairs=lone_surrogate" in r.getMessage() for r in caplog.records)


async def test_a_lone_surrogate_in_a_session_row_keeps_the_connection(tmp_path, clock, monkeypatch, caplog) -> None:
    """Before, the subscribe's reply was refused whole: the subscribe timed out after 60 s and owc reconnected,
    again and again, processing nothing."""
    wire = Wire(monkeypatch)
    lone = wire.string("LONE", LONE)
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        real_list = env.sim.rpc._list

        def with_a_surrogate(params):
            listed = real_list(params)
            listed["sessions"].append({"key": "agent:main:main", "displayName": f"cut {lone}", "updatedAt": 1})
            return listed

        env.sim.rpc._list = with_a_surrogate
        await env.connect()
        env.sim.start_run(key, "after-row").text("Still here.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "after-row")]
        assert message["done"] and _text_of(message) == "Still here."
        assert env.clients["A"].connections_opened == 1
        assert owc_deaths(caplog.records) == []


# ---------------------------------------------------------------------------------------- depth


async def test_tool_arguments_nested_1000_deep(tmp_path, clock, monkeypatch, caplog) -> None:
    """Valid JSON 1,000 deep: orjson reads it (its limit is 1,024) but writes only 254 levels, and the old
    fallback, ``str(args)``, raised RecursionError: the writer died and the message stayed ``done: false``."""
    wire = Wire(monkeypatch)
    deep = nested(1000)
    args = wire.value("DEEP", deep)
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "deep").text("Before.").tool("exec", args, "ok").text("After.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "deep")]
        assert message["done"] and _text_of(message) == "Before.\nAfter."
        calls = [item for item in message["output"] if item["type"] == "function_call"]
        assert len(calls) == 1 and calls[0]["arguments"] == deep  # the whole arguments, as sent
        assert owc_deaths(caplog.records) == []


async def test_a_frame_deeper_than_orjson_reads(tmp_path, clock, monkeypatch, caplog) -> None:
    """3,000 deep: past orjson's 1,024 levels. Before, the frame was refused (and the transcript that repeats
    the arguments with it, so the finalize waited 60 s); now the part past 512 levels is cut."""
    wire = Wire(monkeypatch)
    args = wire.value("DEEP", nested(3000))
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "deeper").text("Before.").tool("exec", args, "ok").text("After.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "deeper")]
        assert message["done"] and _text_of(message) == "Before.\nAfter."
        (call,) = [item for item in message["output"] if item["type"] == "function_call"]
        cut = orjson.loads(call["arguments"])  # JSON again, cut where the frame passed 512 levels
        depth = 0
        while isinstance(cut, dict):
            cut, depth = cut["a"], depth + 1
        assert cut == "[nested too deep]" and 490 < depth < 512
        assert owc_deaths(caplog.records) == []


# ---------------------------------------------------------------------------------------- seq


async def test_an_absurd_seq_does_not_blind_gap_detection(tmp_path, clock, caplog) -> None:
    """Before, a seq of 2^63-1 became the tracker's last number: every later event was "stale" and a real
    loss after it (a dropped run start) was never noticed, so no resync recovered it."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        hostile = Hostile(env.sim)
        hostile.event("presence.delta", {}, seq=2**63 - 1)
        await env.settled()
        conn = env.clients["A"].connection
        gaps_before = conn.gaps
        assert gaps_before >= 1  # the absurd number itself, and the honest one after it
        env.sim.drop(4)  # the run's start push is among them
        run = env.sim.start_run(key, "after-absurd", steps=[Text("Started in the gap."), Hold()])
        await env.clients["A"].request("sessions.describe", {"key": key})  # everything sent before is read
        assert conn.gaps > gaps_before  # the loss is seen, and a resync recovers the run
        run.end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "after-absurd")]
        assert message["done"] and _text_of(message) == "Started in the gap."
        assert any("gateway.seq_gap" in r.getMessage() and "kind=absurd" in r.getMessage() for r in caplog.records)
        assert env.clients["A"].connections_opened == 1


# ---------------------------------------------------------------------------------------- chat.history size


def _no_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Gateway that keeps large messages whole and has no default page budget (it still honours
    ``maxBytes`` when asked)."""
    monkeypatch.setattr(sim_rpc, "HISTORY_MAX_BYTES", 10**12)
    monkeypatch.setattr(sim_rpc, "HISTORY_MAX_SINGLE_MESSAGE_BYTES", 10**12)


@pytest.mark.virtual_seconds(0)
async def test_a_transcript_over_the_frame_limit_is_read_in_pages(tmp_path, clock, monkeypatch, caplog) -> None:
    """30 tool results of 1 MB: one ``chat.history`` reply of 30 MB. Before, it went over owc's 25 MiB
    WebSocket limit: owc's own socket closed with 1009, cancelling every writer, on every finalize."""
    _no_byte_budget(monkeypatch)
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = env.sim.start_run(key, "big").text("Reading.")
        for n in range(30):
            run.tool("read", {"n": n}, f"{n:02d}" + "x" * 1_000_000)
        run.text("Done.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "big")]
        assert message["done"] and _text_of(message) == "Reading.\nDone."
        outputs = [item for item in message["output"] if item["type"] == "function_call_output"]
        assert [o["output"][0]["text"][:2] for o in outputs] == [f"{n:02d}" for n in range(30)]
        assert env.clients["A"].connections_opened == 1
        assert env.sim.requests["chat.history"] >= 7  # 4 MiB pages
        assert owc_deaths(caplog.records) == []


async def test_a_reply_over_the_frame_limit_fails_its_request_only(tmp_path, clock, monkeypatch, caplog) -> None:
    """A Gateway that ignores ``maxBytes`` and ``limit``: the reply over ``policy.maxPayload`` is refused
    unparsed, its request fails at once (before, it waited its 60 s timeout), owc asks for fewer messages,
    then finishes the run from its stream; the connection stays."""
    _no_byte_budget(monkeypatch)
    async with open_env(tmp_path, max_payload=1_000_000) as env:
        chat_id, key = await env.chat()
        real = env.sim.rpc._chat_history
        limits = []

        def ignoring_the_bounds(conn, params):
            limits.append(params.get("limit"))
            return real(conn, {"sessionKey": params["sessionKey"], "limit": 1000})

        env.sim.rpc._handlers["chat.history"] = ignoring_the_bounds
        await env.connect()
        run = env.sim.start_run(key, "huge").text("Reading.")
        for n in range(3):
            run.tool("read", {"n": n}, "y" * 600_000)
        run.text("Done.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "huge")]
        assert message["done"] and _text_of(message) == "Reading.\nDone."
        assert limits[:4] == [200, 50, 12, 3]  # asked again for fewer, down to one
        assert env.clients["A"].connections_opened == 1
        assert owc_deaths(caplog.records) == []
    assert any("runs.history_page_too_large" in r.getMessage() for r in caplog.records)


def test_the_simulator_cuts_history_pages_as_the_gateway_does() -> None:
    """``chat.history`` on 2026.9.6: oversized messages replaced, the oldest dropped to fit ``maxBytes`` (the
    newest always kept), ``nextOffset`` just before the oldest kept."""
    small = [{"role": "user", "content": "u" * 100, "__openclaw": {"seq": i + 1}} for i in range(10)]
    big = {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": False}
    big |= {"content": [{"type": "text", "text": "z" * 200_000}], "__openclaw": {"runId": "r", "id": "i", "seq": 11}}
    messages = [*small, big]
    shown, next_offset = sim_rpc.history_page(messages, limit=200, offset=0, max_bytes=1024, now_ms=5)
    placeholder = shown[-1]
    assert placeholder["content"] == [{"type": "text", "text": sim_rpc.HISTORY_OVERSIZED_TEXT}]
    assert placeholder["toolCallId"] == "c1" and placeholder["__openclaw"]["truncated"] is True
    assert "runId" not in placeholder["__openclaw"]  # measured: the placeholder keeps id and seq, not runId
    assert len(orjson.dumps(shown)) <= 1024 and next_offset == len(shown)
    older, again = sim_rpc.history_page(messages, limit=200, offset=next_offset, max_bytes=1024, now_ms=5)
    end = len(messages) - next_offset
    assert older == messages[end - len(older) : end] and again is None  # the oldest reached
    # One message larger than maxBytes still comes (a page is never empty while messages remain).
    (only,), _ = sim_rpc.history_page(small[:1], limit=5, offset=0, max_bytes=10, now_ms=5)
    assert only is small[0]


@pytest.mark.parametrize(
    "params",
    [{"limit": 0}, {"limit": 1001}, {"limit": "5"}, {"maxBytes": 1000}, {"offset": -1}, {"maxChars": 500_001}],
)
async def test_the_simulator_refuses_history_params_as_the_gateway_does(tmp_path, clock, params) -> None:
    async with open_env(tmp_path) as env:
        _, key = await env.chat()
        await env.connect()
        with pytest.raises(Exception, match="INVALID_REQUEST"):
            await env.clients["A"].request("chat.history", {"sessionKey": key, **params})


def test_history_params_are_what_the_gateway_accepts() -> None:
    params = writer_module.history_params("k")
    assert params["maxBytes"] >= 1024 and 1 <= params["limit"] <= 1000 and params["maxChars"] <= 500_000
    # A page's messages and its in-flight snapshot are each bounded by maxBytes: the reply stays far below
    # the frame limit.
    assert params["maxBytes"] * 2 < DEFAULT_MAX_PAYLOAD / 2


# ---------------------------------------------------------------------------------------- plans


TEMPLATE_EXTRA = [
    {"type": "event", "event": "tick", "payload": {"ts": 1}},
    {"type": "event", "event": "shutdown", "payload": {"reason": "x", "restartExpectedMs": 1000}},
    {"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 1}},
]


async def test_a_plan_of_bad_frames_between_good_runs(tmp_path, clock, monkeypatch, caplog) -> None:
    """Every field owc reads, with every wrong type, size, depth and encoding; whole frames that are not
    frames; unknown events; seq games; and events naming the good runs with ids that cannot be read, all
    between the steps of good runs in two chats. The good runs end as finished messages with their whole
    text and cards, and owc keeps its one connection."""
    recorder = Recorder(monkeypatch)
    async with open_env(tmp_path) as env:
        chats = [await env.chat() for _ in range(2)]
        decoy_key = ids.session_key("main", "user-1", str(uuid.uuid4()))  # no chat owns it
        keeper = await env.connect()
        env.sim.start_run(decoy_key, "template").text("Template text.").tool("exec", {"cmd": "ls"}, "out").end()
        await env.settled()
        recorder.on = False
        templates = [*recorder.templates(fine=False), *TEMPLATE_EXTRA]
        assert {t["event"] for t in templates} >= {"chat", "agent", "sessions.changed", "session.tool"}
        victim_chat, victim_key = await env.chat()
        victim = env.sim.start_run(victim_key, "victim").text("Victim.")

        def victim_streams() -> bool:
            run = keeper.ledger.get(victim_key, "victim")
            return run is not None and run.life.state is State.STREAMING

        await keeper.until(victim_streams)  # its writer renders what the bad frames put in its stream
        bad = [
            *envelope_frames(),
            *payload_frames(templates, decoy_key=victim_key, run_id="victim", depth=1),
        ]
        hostile = Hostile(env.sim)
        runs = 8
        share = -(-len(bad) // (runs * 3))
        chunks = [bad[i : i + share] for i in range(0, len(bad), share)]
        expected = {}
        for n in range(runs):
            chat_id, key = chats[n % 2]
            run_id = f"good-{n}"
            refused = refused_frames(templates, key=key, run_id=run_id)
            run = env.sim.start_run(key, run_id).text(f"Run {n} begins.")
            for spec in chunks[3 * n] if 3 * n < len(chunks) else []:
                hostile.send(spec)
            run.tool("exec", {"n": n}, f"result {n}")
            for spec in [*refused, *(chunks[3 * n + 1] if 3 * n + 1 < len(chunks) else [])]:
                hostile.send(spec)
            run.text(f"Run {n} ends.")
            for spec in chunks[3 * n + 2] if 3 * n + 2 < len(chunks) else []:
                hostile.send(spec)
            run.end()
            expected[(chat_id, key, run_id)] = f"Run {n} begins.\nRun {n} ends."
        victim.end()
        # Well-typed events of runs the Gateway never ran (mutated run ids in the victim's chat) keep their
        # writers open until a list says those runs are not active: a gap (one number spent unsent) makes the
        # resync that ends them, as after any lost event.
        hostile.next_seq()
        hostile.event("tick", {"ts": 1})
        await env.settled()
        lost = []
        for (chat_id, key, run_id), text in expected.items():
            message = (await env.messages(chat_id)).get(ids.message_id(key, run_id))
            cards = [i for i in (message or {}).get("output", []) if i["type"] == "function_call_output"]
            if not (message and message["done"] and message["content"] == text and len(cards) == 1):
                lost.append((run_id, message and message["content"], message and message["done"]))
        assert lost == []
        for chat_id in (chats[0][0], chats[1][0], victim_chat):
            unfinished = [m["id"] for m in (await env.messages(chat_id)).values() if m.get("done") is False]
            assert unfinished == [], "a message left done:false"
        assert env.clients["A"].connections_opened == 1 and not hostile.conn.closing
        assert owc_deaths(caplog.records) == []
        assert hostile.sent > 3000, hostile.sent
        assert not [r for r in caplog.records if r.exc_info], "an exception was logged"


# ---------------------------------------------------------------------------------------- oversized messages


async def test_a_tool_result_the_gateway_leaves_out_of_history_keeps_the_streamed_one(tmp_path, clock) -> None:
    """The real Gateway replaces a transcript message over 128 KiB by a placeholder in ``chat.history``
    (the simulator now does too). Before, the finished card showed "[chat.history omitted: message too
    large]" instead of the result the stream had carried whole."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "big-result").text("Reading.").tool("read", {"p": "f"}, "r" * 200_000).text(
            "Done."
        ).end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "big-result")]
        (result,) = [i for i in message["output"] if i["type"] == "function_call_output"]
        assert message["done"] and message["content"] == "Reading.\nDone."
        assert result["output"][0]["text"] == "r" * 200_000


async def test_a_reply_the_gateway_leaves_out_of_history_is_finished_from_the_stream(tmp_path, clock) -> None:
    """An assistant message over 128 KiB comes back from ``chat.history`` as a placeholder without its
    ``runId``: the transcript holds only the run's later messages. Before, the finished message lost the
    200,000 characters and the tool card ("Done." alone)."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        env.sim.start_run(key, "big-text").text("B" * 200_000).tool("read", {"p": "f"}, "ok").text("Done.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "big-text")]
        assert message["done"] and message["content"] == "B" * 200_000 + "\nDone."
        assert [i["type"] for i in message["output"]] == ["message", "function_call", "function_call_output", "message"]


# ---------------------------------------------------------------------------------------- chat.history messages


def test_one_unreadable_history_message_costs_only_itself(caplog) -> None:
    history = parse_chat_history(
        {
            "sessionKey": "k",
            "messages": [
                {"role": "user", "content": "hi", "idempotencyKey": "r1:user"},
                {"role": "assistant", "content": [], "timestamp": "yesterday"},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello."}], "__openclaw": {"runId": "r1"}},
            ],
        }
    )
    assert [m.role for m in history.messages] == ["user", "assistant"] and history.unreadable == (1,)
    assert any("protocol.bad_history_message index=1" in r.getMessage() for r in caplog.records)
    older = parse_chat_history({"sessionKey": "k", "messages": [{"role": 5}, {"role": "user", "content": "a"}]})
    assert older_page(older, history).unreadable == (0, 2)


def test_pages_that_overlap_because_the_transcript_grew_between_them_join_once() -> None:
    """Offsets count back from the newest stored message: a message stored between the request for the newest page
    and the one for the page before shifts that older page onto messages already read. They are joined once (by
    ``__openclaw.seq``, else by id); before, the run's text and cards were shown twice."""

    def msg(seq: int, text: str, **meta: object) -> dict[str, object]:
        return {"role": "assistant", "content": text, "__openclaw": {"seq": seq, "runId": "R", **meta}}

    newer = parse_chat_history({"sessionKey": "k", "messages": [msg(3, "c"), msg(4, "d")], "hasMore": True})
    older = parse_chat_history({"sessionKey": "k", "messages": [msg(1, "a"), msg(2, "b"), msg(3, "c")]})
    assert [m.text for m in older_page(older, newer).messages] == ["a", "b", "c", "d"]
    unnumbered = parse_chat_history(
        {"sessionKey": "k", "messages": [{"role": "user", "content": "x", "__openclaw": {"id": "m2"}}]}
    )
    assert len(older_page(unnumbered, unnumbered).messages) == 1  # no seq: the same id is the same message


async def test_an_unreadable_message_of_another_run_leaves_the_transcript_usable(tmp_path, clock) -> None:
    """Before, one mistyped message anywhere in the page (here an older run's ``timestamp: "yesterday"``) failed
    the whole ``chat.history`` reply: the run finished from its stream, which had joined late and missed its
    first words."""
    async with open_env(tmp_path, cli_runtime=True) as env:
        chat_id, key = await env.chat()
        session = env.sim.session(key)
        session.append(
            {"role": "assistant", "content": [{"type": "text", "text": "Old."}], "timestamp": "yesterday"}, 1
        )
        run = env.sim.start_run(key, "late", user_text="Go")
        run.text("Early words, unseen.")
        await env.connect()
        run.text(" And more.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "late")]
        assert message["done"] and message["content"] == "Early words, unseen. And more."


async def test_an_unreadable_message_in_the_run_finishes_it_from_the_stream(tmp_path, clock, caplog) -> None:
    """A message that could not be read inside the run's own span may be the run's: its transcript would lack
    it without saying so, so the (complete) stream finishes the run."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        run = env.sim.start_run(key, "own", user_text="Go").text("Before.")
        env.sim.session(key).append({"role": "toolResult", "toolCallId": 7, "content": []}, 1)
        run.tool("exec", {}, "ok").text("After.").end()
        await env.settled()
        message = (await env.messages(chat_id))[ids.message_id(key, "own")]
        assert message["done"] and message["content"] == "Before.\nAfter."
    assert any("render.transcript_incomplete run=own" in r.getMessage() for r in caplog.records)
