"""``owc.render.never_less``: a finished message never shows less than its tabs were shown, unless the transcript
says the run replaced it (issue 24, item 5). Cell by cell, then a property over random outputs."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from owc.render.items import function_call_item, function_call_output_item, message_item, output_text
from owc.render.never_less import gained_since_claim, never_less, shown_in_front
from owc.render.seam import RECOVERED, SEAM_TEXTS, is_seam

SEAM = SEAM_TEXTS[RECOVERED]


def msg(text: str, key: str = "a") -> Any:
    return message_item(f"msg_{key}", text, done=True)


def call(call_id: str) -> Any:
    return function_call_item(call_id, "exec", {"cmd": "ls"}, status="completed")


def result(call_id: str, text: str = "a b") -> Any:
    return function_call_output_item(f"fco_{call_id}", call_id, text, is_error=False)


def test_the_streamed_tail_a_cut_lost_after_a_tool_call_is_kept() -> None:
    shown = [msg("Checking."), call("c1"), result("c1"), msg("Now the second half", "b")]
    transcript = [msg("Checking."), call("c1"), result("c1")]
    out = never_less(shown, transcript)
    assert output_text(out) == "Checking.\nNow the second half" and len(out) == 4
    assert out[:3] == transcript  # the transcript's own items where it has them


def test_a_text_the_stream_cut_short_is_the_transcripts_whole_text() -> None:
    assert output_text(never_less([msg("Hel")], [msg("Hello world.")])) == "Hello world."


def test_a_shown_text_that_extends_the_transcripts_is_kept() -> None:
    out = never_less([msg("Hello world. And more")], [msg("Hello world.")])
    assert output_text(out) == "Hello world. And more" and out[0]["id"] == "msg_a"


def test_a_stream_that_ran_two_items_into_one_does_not_show_the_second_twice() -> None:
    """Fuzzer, seed 51: with a gap the stream's first item held both texts; the transcript has them apart."""
    transcript = [msg("Two lines."), call("c1"), result("c1"), msg("Two lines.", "b")]
    shown = [msg("Two lines.\n\nTwo lines."), call("c1"), result("c1"), msg("Two lines.", "b")]
    assert never_less(shown, transcript) == transcript


def test_trailing_whitespace_is_no_extension() -> None:
    transcript = [msg("Hello.")]
    assert never_less([msg("Hello.\n\n")], transcript) == transcript


def test_a_text_the_run_replaced_is_the_transcripts() -> None:
    transcript = [msg("Final answer.")]
    assert never_less([msg("A draft that was replaced, longer")], transcript) == transcript


def test_cards_the_stream_missed_come_from_the_transcript() -> None:
    transcript = [msg("Checking."), call("c1"), result("c1"), msg("Done.", "b")]
    assert never_less([msg("Checking.")], transcript) == transcript


def test_where_the_two_part_the_transcript_decides_from_there_on() -> None:
    transcript = [msg("Checking."), call("c2"), result("c2")]
    assert never_less([msg("Checking."), call("c1"), msg("x", "b")], transcript) == transcript


def test_nothing_shown_is_the_transcript() -> None:
    transcript = [msg("x"), call("c1")]
    assert never_less([], transcript) == transcript


# A stream that had a gap or joined the run mid-way (``missed``): it lacks some of the run's items, so the two are
# aligned at the transcript's end (fuzz seeds 107665, 102690, 82222: a crash after a tool call stored nothing of
# the text after it).


def test_a_stream_joined_after_the_tool_call_keeps_the_text_past_the_transcripts_end() -> None:
    shown = [msg("Working on it.", "b")]  # the joiner missed the call and its result
    transcript = [call("c1"), result("c1")]
    out = never_less(shown, transcript, missed=True)
    assert out == [*transcript, shown[0]]
    assert never_less(shown, transcript) == transcript  # a stream that saw everything: the run replaced it


def test_a_dropped_result_keeps_the_text_after_it() -> None:
    shown = [call("c1"), msg("Numbers 1, 2 and 3.", "b")]  # the result's event was dropped
    transcript = [call("c1"), result("c1")]
    assert never_less(shown, transcript, missed=True) == [*transcript, shown[1]]


def test_a_joiners_run_wide_text_shows_only_what_the_transcript_lacks() -> None:
    # owc2 joined after "Done.": the first delta it saw carried the run-wide text whole, after the cards.
    shown = [call("c1"), result("c1"), msg("Done.\n\nAll checks passed.", "b")]
    transcript = [msg("Done."), call("c1"), result("c1")]
    out = never_less(shown, transcript, missed=True)
    assert out[:3] == transcript and len(out) == 4
    assert output_text(out) == "Done.\nAll checks passed." and out[3]["id"] == "msg_b"


def test_a_missed_stream_whose_text_the_run_replaced_is_the_transcripts() -> None:
    transcript = [call("c1"), result("c1"), msg("The final answer.")]
    assert never_less([msg("A draft", "b")], transcript, missed=True) == transcript
    # A card the transcript holds after a shown item it lacks: no tail the transcript lost.
    assert never_less([msg("x", "b"), call("c1")], [call("c1"), result("c1")], missed=True) == [
        call("c1"),
        result("c1"),
    ]


def test_a_missed_stream_that_shows_nothing_new_is_the_transcript() -> None:
    transcript = [msg("Done."), call("c1"), result("c1"), msg("All checks passed.", "b")]
    shown = [call("c1"), result("c1"), msg("Done.\n\nAll checks passed.", "b")]
    assert never_less(shown, transcript, missed=True) == transcript


def test_a_silent_sentinel_in_a_joiners_run_wide_text_is_no_item() -> None:
    """Fuzz seed 322656: a run said NO_REPLY, called a tool and said "NO"; owc joined at its end, and the run-wide
    text it got was "NO_REPLY\n\nNO". Read against the transcript's "NO" (the transcript hides the sentinel), the
    sentinel was taken for that text gone on, and "_REPLY" and a second "NO" were added after it. A sentinel is no
    item of either side."""
    transcript = [call("c1"), result("c1"), msg("NO")]
    shown = [msg("NO_REPLY\n\nNO", "b")]
    assert never_less(shown, transcript, missed=True, run_text="NO_REPLY\n\nNO") == transcript
    # What a joiner got past the transcript's text is still added, the sentinel left out.
    out = never_less([msg("NO_REPLY\n\nNO\n\nMore.", "b")], transcript, missed=True, run_text="NO_REPLY\n\nNO\n\nMore.")
    assert out[:3] == transcript and output_text(out) == "NO\nMore."


def test_a_joiners_run_wide_text_past_the_transcripts_texts_is_added_at_the_end() -> None:
    """Fuzz seed 107665: the joiner saw only text, one item holding the transcript's text and the lost one."""
    shown = [msg("A.\n\nWorking on it.")]
    transcript = [msg("A."), call("c1"), result("c1")]
    out = never_less(shown, transcript, missed=True, run_text="A.\n\nWorking on it.")
    assert out[:3] == transcript and output_text(out) == "A.\nWorking on it." and out[3]["id"] != "msg_a"
    # A silent sentinel the run said last shows nothing live and the transcript hides it: nothing is added.
    assert never_less(shown, transcript, missed=True, run_text="A.\n\nWorking on it.\n\nNO_REPLY") == out
    # The seed-51 shape (a stream that ran two items into one): nothing lost, nothing added.
    transcript = [msg("Two lines."), call("c1"), result("c1"), msg("Two lines.", "b")]
    shown = [msg("Two lines.\n\nTwo lines."), call("c1"), result("c1"), msg("Two lines.", "b")]
    assert never_less(shown, transcript, missed=True, run_text="Two lines.\n\nTwo lines.") == transcript


TEXT = st.text(alphabet="ab .", max_size=6)
ITEMS = st.lists(
    st.one_of(TEXT.map(msg), st.sampled_from(["c1", "c2"]).map(call), st.sampled_from(["c1", "c2"]).map(result)),
    max_size=5,
)


@given(ITEMS, ITEMS)
def test_never_shorter_than_either_unless_they_part(shown: list[Any], transcript: list[Any]) -> None:
    out = never_less(shown, transcript)
    assert len(out) >= len(transcript)  # nothing of the transcript is dropped
    if len(out) == len(transcript) + len(shown[len(transcript) :]) and len(shown) > len(transcript):
        # the shown tail past the transcript is kept whole
        assert out[len(transcript) :] == shown[len(transcript) :]
    # every shown text the result keeps at a place is at least as long as the transcript's there
    for got, kept in zip(out, transcript):
        assert output_text([got]).startswith(output_text([kept]).rstrip())


# ``shown_in_front``: a finished M that lacks what this process showed of it (issue 24, class A of the campaign).


def test_a_cut_runs_stream_goes_in_front_of_the_continuation_that_never_saw_it() -> None:
    # S stored nothing (a crash before anything was stored); the recovery R, in another process, finished M alone.
    recovered = [msg("Recovered after the restart.", "r")]
    out = shown_in_front(["S", "R"], 0, recovered, {"S": [msg("Two lines:\nthe second one.")]})
    assert out is not None
    output, own_at = out
    # The seam (issue 25 item 3) goes in with the part put in front: R finished M with nothing before it to follow.
    assert output_text(output) == f"Two lines:\nthe second one.\n{SEAM}\nRecovered after the restart." and own_at == 1
    assert is_seam(output[1]) and output[2] is recovered[0], "the continuation's part unchanged, after its seam"


def test_the_tail_a_crash_cut_after_a_tool_call_goes_in_front_of_the_continuation() -> None:
    held = [msg("Checking."), call("c1"), result("c1")]  # S's part from its transcript
    output = [*held, msg("Recovered.", "r")]
    shown = [*held, msg("Now the second half", "b")]
    out = shown_in_front(["S", "R"], 3, output, {"S": shown})
    assert out is not None
    assert output_text(out[0]) == "Checking.\nNow the second half\nRecovered." and out[1] == 4
    assert out[0][:3] == held


def test_nothing_is_added_when_m_holds_what_was_shown() -> None:
    shown = [msg("Checking.")]
    assert shown_in_front(["S", "R"], 1, [msg("Checking."), msg("Recovered.", "r")], {"S": shown}) is None
    # The second pass: what the first added is there.
    first = shown_in_front(["S", "R"], 0, [msg("Recovered.", "r")], {"S": shown})
    assert first is not None
    assert shown_in_front(["S", "R"], first[1], first[0], {"S": shown}) is None


def test_a_shown_text_the_transcript_replaced_is_not_added() -> None:
    # M's part of S is the transcript's, which replaced what was streamed (a different text): M stands.
    output = [msg("The final answer."), msg("Recovered.", "r")]
    assert shown_in_front(["S", "R"], 1, output, {"S": [msg("A draft")]}) is None


def test_only_the_run_just_before_the_last_counts() -> None:
    output = [msg("Recovered.", "r")]
    # S is not the run before M's last (a second continuation finished M): its part is not known apart.
    assert shown_in_front(["S", "R1", "R2"], 0, output, {"S": [msg("Streamed.")]}) is None
    # A message of one run whose text the transcript replaced, or no record of where its last run's part begins.
    assert shown_in_front(["S"], 0, output, {"S": [msg("Streamed.")]}) is None
    assert shown_in_front(["S", "R"], 2, output, {"S": [msg("Streamed.")]}) is None
    # Nothing shown here.
    assert shown_in_front(["S", "R"], 0, output, {"S": []}) is None
    assert shown_in_front(["S", "R"], 0, output, {"R": [msg("Streamed.")]}) is None


def test_a_continuations_own_copy_adds_the_chain_part_it_holds() -> None:
    # This process's copy of the recovery, linked to the cut it held: its prefix is S's part as shown here.
    out = shown_in_front(["S", "R"], 0, [msg("Recovered.", "r")], {"R": [msg("x")], "S": [msg("Streamed.")]})
    assert out is not None and output_text(out[0]) == f"Streamed.\n{SEAM}\nRecovered."


# ``shown_in_front`` for M's last run: another process finished M with the run this process streamed (fuzz seed
# 40164: the cut run's own message, from its transcript, by the deploy that never saw it stream).


def test_a_cut_runs_stream_goes_into_its_own_message_another_process_finished_from_the_transcript() -> None:
    stored = [msg("Checking."), call("c1"), result("c1")]  # S's transcript: the crash stored nothing after the call
    shown = [*stored, msg("Now the second half", "b")]
    out = shown_in_front(["S"], 0, stored, {"S": shown})
    assert out is not None
    output, own_at = out
    assert output_text(output) == "Checking.\nNow the second half" and own_at == 0
    assert output[:3] == stored, "the transcript's items stay"
    # The second pass finds nothing lacking.
    assert shown_in_front(["S"], 0, output, {"S": shown}) is None


def test_the_last_runs_text_cut_mid_item_is_extended_and_a_replaced_one_is_not() -> None:
    out = shown_in_front(["S"], 0, [msg("Two lines:")], {"S": [msg("Two lines:\nthe second one.")]})
    assert out is not None and output_text(out[0]) == "Two lines:\nthe second one."
    # The transcript replaced what was streamed (a different text): M stands.
    assert shown_in_front(["S"], 0, [msg("The final answer.")], {"S": [msg("A draft")]}) is None


def test_another_copy_of_the_continuation_lacks_what_this_copy_streamed() -> None:
    # M = S's part and R's, finished by another process's copy of R; this process showed R's text further.
    output = [msg("Checking."), msg("Picked", "r")]
    out = shown_in_front(["S", "R"], 1, output, {"R": [msg("Checking."), msg("Picked up.", "r")]})
    assert out is not None and output_text(out[0]) == "Checking.\nPicked up." and out[1] == 1


def test_both_runs_parts_are_added_the_chain_part_first() -> None:
    # S's tail in front of R's part, then R's tail at the end: one pass, ``own_at`` moved past S's part.
    output = [msg("Checking."), call("c1"), result("c1"), msg("Picked", "r")]
    s_shown = [msg("Checking."), call("c1"), result("c1"), msg("Now the second half", "b")]
    through_r = [*s_shown, msg("Picked up.", "r")]
    out = shown_in_front(["S", "R"], 3, output, {"S": s_shown, "R": through_r})
    assert out is not None
    assert output_text(out[0]) == "Checking.\nNow the second half\nPicked up." and out[1] == 4
    assert shown_in_front(["S", "R"], out[1], out[0], {"S": s_shown, "R": through_r}) is None


def test_a_continuations_finish_keeps_what_the_earlier_part_gained_since_its_claim() -> None:
    held = [msg("Checking."), call("c1"), result("c1"), msg("Now the second half", "b")]  # M now
    output = [msg("Checking."), call("c1"), result("c1"), msg("Recovered.", "r")]  # from M at the claim
    out = gained_since_claim(held, output, 3)
    assert out is not None and output_text(out[0]) == "Checking.\nNow the second half\nRecovered." and out[1] == 4
    assert gained_since_claim(held[:3], output, 3) is None, "nothing gained"
    # The finish's reading of the earlier runs wins where the two part (the transcript replaced a text).
    assert gained_since_claim([msg("A draft")], [msg("The answer."), msg("Recovered.", "r")], 1) is None


# ``shown_in_front`` for a stream that joined the cut run mid-way (fuzz seeds 211298, 150408): the deploy that joined
# after the tool call streamed the tail; the other, which missed it, finished M from the transcript first.


def test_a_joiners_stream_goes_in_front_of_the_continuation_lined_up_at_the_transcripts_end() -> None:
    held = [call("c1"), result("c1")]  # S's part from its transcript: the crash stored nothing after the call
    output = [*held, msg("Recovered.", "r")]
    shown = [msg("Done.")]  # this deploy joined S after its call: its stream has the tail alone
    # Judged as a whole-run stream, [text] against [call, result] parts at once and the transcript wins.
    assert shown_in_front(["S", "R"], 2, output, {"S": shown}) is None
    out = shown_in_front(["S", "R"], 2, output, {"S": shown}, {"S": "Done."})
    assert out is not None
    assert out[0][:2] == held and output_text(out[0]) == "Done.\nRecovered." and out[1] == 3
    assert out[0][3] is output[2], "the continuation's part unchanged"
    assert shown_in_front(["S", "R"], out[1], out[0], {"S": shown}, {"S": "Done."}) is None, "a second pass"


def test_a_joiners_stream_goes_into_its_runs_own_message_another_process_finished() -> None:
    stored = [call("c1"), result("c1")]
    out = shown_in_front(["S"], 0, stored, {"S": [msg("Done.")]}, {"S": "Done."})
    assert out is not None and out[0][:2] == stored and output_text(out[0]) == "Done." and out[1] == 0


def test_a_joiners_text_the_transcript_replaced_is_not_added() -> None:
    output = [msg("The final answer."), call("c1"), result("c1"), msg("Recovered.", "r")]
    assert shown_in_front(["S", "R"], 3, output, {"S": [msg("A draft")]}, {"S": "A draft"}) is None
    # The joiner's text begins with the transcript's (the run-wide buffer, sent whole): only its rest is added.
    out = shown_in_front(
        ["S", "R"], 3, output, {"S": [msg("The final answer.\n\nMore.")]}, {"S": "The final answer.\n\nMore."}
    )
    assert out is not None and output_text(out[0]) == "The final answer.\nMore.\nRecovered." and out[1] == 4


def test_a_run_not_named_missed_is_judged_as_a_whole_run_stream() -> None:
    output = [call("c1"), result("c1"), msg("Recovered.", "r")]
    assert shown_in_front(["S", "R"], 2, output, {"S": [msg("Done.")]}, {"R": "Done."}) is None
