"""A finished message never shows less than its tabs were shown. Pure.

The finalize takes a run's output from its transcript (the Gateway's record: whole text, every tool card, the
right order). A cut run's transcript can lack what was streamed, though: a Gateway stop or crash stores nothing of
the turn text it cuts (measured on 2026.9.6: the partial is lost), so after a tool call the transcript ends at the
call while the tabs had shown the text that followed (issue 24, item 5). ``never_less`` keeps the transcript's
items and adds back what the transcript lost, item by item:

* walking both lists in order, an item the two share (a message at the same place, a tool call or result with the
  same call id) comes from the transcript, except that the transcript's *last* item, a message whose shown text
  extends the transcript's (the transcript's text, trailing whitespace aside, is a strict prefix of the shown
  text), keeps the shown text (an earlier such item is a stream that ran two items into one: the rest follows);
* where the transcript goes on past what was shown, the rest is the transcript's (the stream missed it);
* where what was shown goes on past the transcript, the rest is what was shown (the transcript lost it);
* where the two part (a different item at the same place, or a shown text the transcript's does not begin
  with), the transcript says the run replaced what was shown (a ``replace`` text, a gap the stream papered over):
  from there on the transcript's items alone.

So the result is never shorter than what was shown unless the transcript says the run replaced it, and never
drops anything of the transcript.

A stream that had a gap or joined the run mid-way (``missed``) lacks some of the run's items, so where it parts from
the transcript is no sign of a replacement: shown = [text "Working on it."] and transcript = [call, result] part at
item 0 though the text lies past the transcript's end (fuzz seeds 102690, 107665, 82222). For such a stream the
two are aligned where they meet instead (``_past_the_end``): the Gateway's chat text is one run-wide buffer (items
joined by a blank line) sent whole in every delta, so the shown texts, split at blank lines, begin with the
transcript's unless the run replaced them; the shown items past the transcript's end are those after the last
shown card the transcript holds and the shown text past the transcript's text. The result is the transcript's
items, then those; a shown output that does not fit that reading (a text neither extends, a card the transcript
holds after a new item) is the transcript's from where they part, as above.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from owc.render.frozen import FrozenDict, FrozenList
from owc.render.items import message_item
from owc.render.seam import is_seam, seam_item
from owc.render.sentinels import is_silent


def never_less(
    shown: Sequence[Mapping[str, Any]],
    transcript: Sequence[Mapping[str, Any]],
    *,
    missed: bool = False,
    run_text: str | None = None,
) -> list[Any]:
    """The transcript's items with what was shown and the transcript lost added back (the module's rule). Returns
    the transcript's own list (a copy) when nothing was lost. ``missed``: the stream that showed ``shown`` had a
    gap or joined the run mid-way (it may lack any of the run's items); ``run_text``, for such a stream, the
    run-wide text it received: its items past the transcript's texts (which begin it) are added at the end, for a
    joiner can hold them in an item the transcript ends before (fuzz seed 107665: shown [text "A.\n\nB."],
    transcript [text "A.", call, result])."""
    out = _never_less(shown, transcript, missed=missed)
    if missed and run_text is not None:
        # A silent sentinel (NO_REPLY) shows nothing live and the transcript hides it: it is no item of either.
        kept = [
            piece
            for item in out
            if item.get("type") == "message"
            for piece in _pieces(_text(item) or "")
            if not is_silent(piece)
        ]
        sent = [piece for piece in _pieces(run_text) if not is_silent(piece)]
        if len(sent) > len(kept) and sent[: len(kept)] == kept:
            rest = "\n\n".join(sent[len(kept) :])
            key = "".join(str(item.get("id")) for item in out)
            digest = hashlib.sha1(f"{key}\x00{rest}".encode("utf-8", "surrogatepass"), usedforsecurity=False)
            out.append(message_item(f"msg_{digest.hexdigest()[:24]}", rest, done=True))
    return out


def _never_less(
    shown: Sequence[Mapping[str, Any]], transcript: Sequence[Mapping[str, Any]], *, missed: bool
) -> list[Any]:
    out: list[Any] = []
    common = min(len(shown), len(transcript))

    def parted(index: int) -> list[Any]:
        tail = _past_the_end(shown, transcript) if missed else None
        return [*transcript, *tail] if tail is not None else [*out, *transcript[index:]]

    for index in range(common):
        seen, kept = shown[index], transcript[index]
        if not _same_item(seen, kept):
            return parted(index)
        if kept.get("type") == "message":
            seen_text, kept_text = _text(seen), _text(kept)
            if seen_text is None or kept_text is None:
                out.append(kept)
                continue
            if not seen_text.startswith(kept_text.rstrip()):
                return parted(index)  # the run replaced the text it had shown
            if index == len(transcript) - 1 and len(seen_text.rstrip()) > len(kept_text.rstrip()):
                # Only the transcript's last item can have lost its tail to a cut; an earlier one that the shown
                # text extends is a stream that ran two items into one (a gap): the next item holds the rest.
                out.append(FrozenDict({**kept, "content": seen["content"]}))
                continue
        out.append(kept)
    out.extend(transcript[common:] if len(transcript) > common else shown[common:])
    return out


def _pieces(text: str) -> list[str]:
    """A text's items as the Gateway's run-wide buffer joins them (at blank lines), each stripped, none empty."""
    return [piece.strip() for piece in text.split("\n\n") if piece.strip()]


def _past_the_end(shown: Sequence[Mapping[str, Any]], transcript: Sequence[Mapping[str, Any]]) -> list[Any] | None:
    """What a stream that missed part of the run showed past the transcript's end (the module's last paragraph),
    or None when the shown output does not read as the transcript's items, some missing, then more."""
    kept_texts: list[str] = []
    cards = set()
    for item in transcript:
        if item.get("type") == "message":
            text = _text(item)
            if text is None:
                return None
            kept_texts.extend(_pieces(text))
        else:
            cards.add((item.get("type"), item.get("call_id")))
    tail: list[Any] = []
    at = 0  # how many of the transcript's text pieces the shown texts have matched so far
    for item in shown:
        if item.get("type") != "message":
            if (item.get("type"), item.get("call_id")) in cards:
                if tail:
                    return None  # a card the transcript holds after a new item: not a tail the transcript lost
                continue
            tail.append(item)
            continue
        text = _text(item)
        if text is None:
            return None
        new: list[str] = []
        # A silent sentinel (NO_REPLY) in the run-wide text is no item: the transcript hides it, and taken for the
        # start of the transcript's text it read as that text gone on (fuzz seed 322656: "NO_REPLY" against "NO"
        # kept "_REPLY").
        for piece in (piece for piece in _pieces(text) if not is_silent(piece)):
            if at < len(kept_texts):
                kept = kept_texts[at]
                if piece != kept and not (at == len(kept_texts) - 1 and piece.startswith(kept)):
                    return None  # neither extends the other: the run replaced the text (or a stale prefix)
                if piece != kept:
                    new.append(piece[len(kept) :].strip())  # the transcript's last text, cut short, went on
                at += 1
            else:
                new.append(piece)
        new = [piece for piece in new if piece]
        if new and new == [piece for piece in _pieces(text) if not is_silent(piece)]:
            tail.append(item)  # all of it past the transcript's text
        elif new:
            # Its start is the transcript's (a stream that joined mid-run got the run-wide text whole): the rest.
            content = FrozenList((FrozenDict(type="output_text", text="\n\n".join(new)),))
            tail.append(FrozenDict({**item, "content": content}))
    return tail if tail else None


def _same_item(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The same item of the run's output: the same kind, and for a tool card the same call."""
    if a.get("type") != b.get("type"):
        return False
    if a.get("type") in ("function_call", "function_call_output"):
        return a.get("call_id") == b.get("call_id")
    return True


def _text(item: Mapping[str, Any]) -> str | None:
    """A message item's text (its ``output_text`` parts joined), None for a shape owc does not write."""
    content = item.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return None
    parts = []
    for part in content:
        if not isinstance(part, Mapping) or not isinstance(part.get("text"), str):
            return None
        parts.append(part["text"])
    return "".join(parts)


def shown_in_front(
    chain: Sequence[str],
    own_at: int,
    output: Sequence[Mapping[str, Any]],
    shown_through: Mapping[str, Sequence[Mapping[str, Any]]],
    missed: Mapping[str, str] | None = None,
) -> tuple[list[Any], int] | None:
    """What a finished message M must become so that it shows what one process's tabs were shown of it, or None
    when M already does (issue 24, items 5 and 14: a run a crash cut stored nothing of what it streamed; another
    process, which never saw that stream, finished M from the transcript).

    ``chain`` is M's ``meta.openclaw_chain`` (the runs it holds, in order; a message of one run: that run alone),
    ``output`` M's output, and ``own_at`` where the part of M's last run begins in ``output``
    (``meta.openclaw_own_at``; 0 for a message of one run). ``shown_through`` maps a run id to what this process
    showed of M up to and including that run's part. Two runs count, in this order:

    * the run just before M's last (another process's continuation finished M): M's part before ``own_at`` is its
      chain up to that run (an earlier run's part is not known apart from the runs after it). That part becomes
      ``never_less`` of what was shown and what M holds, in front of the continuation's part, unchanged;
    * M's last run (another process finished M with that very run, from its transcript: the cut run's own message,
      or another copy of the continuation): the whole of M becomes ``never_less`` of what was shown through it and
      M (fuzz seed 40164: the deploy that never saw the stream finished the cut run's message as the run's own).

    ``missed`` maps a run of ``shown_through`` whose stream here had a gap or joined it mid-run to the run-wide text
    that stream received: what was shown of it is lined up at the transcript's end, as a finalize lines it up
    (``never_less(missed=True, run_text=...)``). Without it, a joiner's [text] against the transcript's [call,
    result] parted at once and the transcript won: fuzz seeds 211298 and 150408, the deploy that joined the cut run
    after its tool call streamed its tail, the other deploy, which had missed that tail, finished M with the
    recovery first, and the tail was never added.

    The returned index is where the last run's part now begins. ``never_less`` adds only what M lacks, and never a
    text the transcript replaced; a second pass with the same ``shown_through`` finds nothing lacking."""
    if not chain or not 0 <= own_at <= len(output):
        return None
    missed = missed or {}

    def merged(run_id: str, shown: Sequence[Mapping[str, Any]], held: Sequence[Mapping[str, Any]]) -> list[Any]:
        if run_id in missed:
            return never_less(shown, held, missed=True, run_text=missed[run_id])
        return never_less(shown, held)

    new, at = list(output), own_at
    before = shown_through.get(chain[-2]) if len(chain) >= 2 else None
    if before:
        part = merged(chain[-2], before, new[:at])
        own = _seamed(part, chain[-1], new[at:]) if at == 0 else new[at:]
        new, at = [*part, *own], len(part)
    through = shown_through.get(chain[-1])
    if through:
        # ``never_less`` keeps every item but the last in place, and adds only past the end: ``at`` stands.
        new = merged(chain[-1], through, new)
    if len(new) == len(output) and all(a == b for a, b in zip(new, output)):
        return None
    return new, at


def _seamed(before: Sequence[Any], run_id: str, own: Sequence[Any]) -> list[Any]:
    """A continuation's part ``own`` after an earlier part ``before`` added to an M that was finished with none (so
    no seam either): with its seam in front (``owc.render.seam``) when both show something."""
    if before and own and not is_seam(own[0]):
        return [seam_item(run_id), *own]
    return list(own)


def gained_since_claim(
    held: Sequence[Mapping[str, Any]], output: Sequence[Mapping[str, Any]], own_at: int, run_id: str | None = None
) -> tuple[list[Any], int] | None:
    """A continuation's finish of M, from M as it was at its claim: what M's earlier runs' part (``held``, M's
    output as it is now, finished with those runs alone) gained since then goes in front of the continuation's part,
    or None when nothing did. ``output`` is the finish's output and ``own_at`` where the continuation's part begins
    in it. The earlier part becomes ``never_less(held, output[:own_at])`` (the finish's reading of those runs wins
    where the two part), the continuation's part follows unchanged; the index returned is where it now begins
    (fuzz seed 40164: another process put the cut run's streamed tail into M after this claim read M)."""
    if not 0 <= own_at <= len(output):
        return None
    front = list(output[:own_at])
    part = never_less(held, front)
    if len(part) == len(front) and all(a == b for a, b in zip(part, front)):
        return None
    own = output[own_at:]
    if not front and run_id is not None:  # the finish had no earlier part, so no seam: one goes with the part gained
        own = _seamed(part, run_id, own)
    return [*part, *own], len(part)
