"""The finished output of run R, from the run's own transcript (``chat.history``), by run id only. Pure.

R's messages are the assistant messages whose ``__openclaw.runId`` is R, or whose id / idempotency key is
``cli-assistant:R`` (CLI runtimes) or ``R:assistant`` (an aborted partial), their ``toolCall`` parts, and the
``toolResult`` messages answering those calls, in transcript order. Never another run's text: there is no
"newest reply" fallback (that is what once delivered a later run's text for an earlier run). If the
transcript does not hold R, the streamed copy stands, complete unless a gap was marked.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs

from owc.protocol import ChatHistory, HistoryMessage, TextPart, ToolCallPart
from owc.render import ask_card
from owc.render.frozen import FrozenDict
from owc.render.items import (
    count_cards,
    function_call_item,
    function_call_output_item,
    item_id,
    message_item,
    output_text,
    result_text,
)
from owc.render.sentinels import is_silent
from owc.render.turn import TurnRenderer, call_key

log = logging.getLogger("owc.render")


@attrs.frozen
class FinishedRun:
    """What a finalize writes. ``source`` is ``transcript`` or ``stream``; ``complete`` is False only for a
    streamed copy with a gap mark (events may be missing)."""

    content: str
    output: list[dict[str, Any]]
    cards: int
    source: str
    complete: bool
    error: dict[str, str] | None = None


def run_messages(history: ChatHistory, run_id: str) -> list[HistoryMessage]:
    """R's assistant messages and the tool results answering R's calls, in transcript order. A tool result that
    names its run (``__openclaw.runId``, as the real Gateway writes them) belongs to that run alone, whatever its
    call id says: models reuse ids (``call_1`` in every run), and one run's card must not show another's result.
    One without a run id is matched by call id, among those that follow R's first message."""
    mine = [m for m in history.messages if m.role == "assistant" and m.assistant_run_id == run_id]
    call_ids = {c.id for m in mine for c in m.tool_calls}
    wanted = {id(m) for m in mine}
    out: list[HistoryMessage] = []
    started = False
    for m in history.messages:
        if id(m) in wanted:
            started = True
            out.append(m)
        elif m.role == "toolResult":
            meta = m.raw.get("__openclaw")
            owner = meta.get("runId") if isinstance(meta, dict) else None
            if owner == run_id or (owner is None and started and m.tool_call_id in call_ids):
                out.append(m)
    return out


def reaches_run_start(history: ChatHistory, run_id: str) -> bool:
    """Whether a window of the transcript (the newest messages, ``chat.history`` pages) holds all of R:
    nothing older exists, or R's user turn is in it, or a message older than R's first precedes it (a
    session's runs are serialized, so R's messages are contiguous). A long run's beginning can lie beyond
    the first page; finalizing from a window without it would drop the run's opening text and cards."""
    if not history.has_more:
        return True
    if any(m.user_run_id == run_id for m in history.messages):
        return True
    mine = {id(m) for m in run_messages(history, run_id)}
    first = next((i for i, m in enumerate(history.messages) if id(m) in mine), None)
    return first is not None and first > 0


def output_from_transcript(history: ChatHistory, run_id: str) -> list[dict[str, Any]] | None:
    messages = run_messages(history, run_id)
    if not any(m.role == "assistant" for m in messages):
        return None
    output: list[dict[str, Any]] = []
    # A run may use one call id for several calls (models reuse ids): the n-th call with an id is answered by
    # the n-th result with it, and keyed as the live rendering keys it (``call_key``).
    results: dict[str | None, list[HistoryMessage]] = {}
    for m in messages:
        if m.role == "toolResult":
            results.setdefault(m.tool_call_id, []).append(m)
    uses: dict[str, int] = {}
    emitted: set[str] = set()
    earlier: list[str] = []  # texts of R's assistant messages so far
    for n, message in enumerate(messages):
        if message.role != "assistant":
            continue
        text_buf: list[str] = []
        if message.aborted:
            # An aborted partial is the Gateway's run-wide buffer: the text of R's earlier messages (joined by
            # blank lines) followed by what was being written. Keep only the part no earlier message holds.
            said = "\n\n".join(t for t in earlier if t)
            whole = message.text
            if said and whole.startswith(said):
                message = attrs.evolve(message, parts=(TextPart(whole[len(said) :]),))
        if message.is_terminal_error and message.error_copy is not None:
            # The Gateway's copy of the failure is the run's error, shown as the error (``finish``), not as
            # reply text; what follows it is the partial text the run had written before it failed.
            message = _without_error_copy(message)
        earlier.append(message.text.strip("\n"))

        def flush(part_index: int) -> None:
            text = "".join(text_buf).strip("\n")
            text_buf.clear()
            if text.strip() and not is_silent(text):
                output.append(message_item(item_id("msg", run_id, f"history:{n}:{part_index}"), text, done=True))

        for p, part in enumerate(message.parts):
            if isinstance(part, TextPart):
                text_buf.append(part.text)
            elif isinstance(part, ToolCallPart):
                flush(p)
                n = uses[part.id] = uses.get(part.id, 0) + 1
                key = call_key(part.id, n)
                answers = results.get(part.id) or []
                result = answers[n - 1] if n <= len(answers) else None
                status = "completed" if result is None or not result.is_error else "failed"
                text = None if result is None else result_text(result.raw.get("content"))
                card = ask_card.view(part.name, part.arguments, text, is_error=result is not None and result.is_error)
                output.append(function_call_item(key, card.name, card.args, status=status))
                if result is not None and key not in emitted:
                    emitted.add(key)
                    output.append(
                        function_call_output_item(
                            item_id("fco", run_id, key), key, card.result or "", is_error=result.is_error
                        )
                    )
        flush(len(message.parts))
    return output


def _without_error_copy(message: HistoryMessage) -> HistoryMessage:
    """``message`` (a terminal error record) without the Gateway's copy of the failure: the first paragraph of
    its first text part, and the blank line after it."""
    parts = list(message.parts)
    for i, part in enumerate(parts):
        if isinstance(part, TextPart):
            rest = part.text.split("\n\n", 1)
            parts[i] = TextPart(rest[1] if len(rest) > 1 else "")
            break
    return attrs.evolve(message, parts=tuple(parts))


#: What a live error terminal without an ``errorMessage`` shows.
RUN_FAILED = "The run failed."


def terminal_error(renderer: TurnRenderer) -> dict[str, str] | None:
    terminal = renderer.terminal
    if terminal is not None and terminal.state == "error":
        return {"content": terminal.error_message or RUN_FAILED}
    return None


def transcript_error(history: ChatHistory, run_id: str) -> str | None:
    """The failure R's transcript records, in the Gateway's words (its copy, as ``chat.history`` shows it), when
    R's last assistant message is the Gateway's terminal error record; else ``None``. A run that failed while
    owc was away (or whose error terminal fell in a seq gap) is known to have failed only from this and from
    the session row (``lastRunError`` while ``lastRunId`` is R)."""
    mine = [m for m in run_messages(history, run_id) if m.role == "assistant"]
    if not mine or not mine[-1].is_terminal_error:
        return None
    return mine[-1].error_copy or RUN_FAILED


def shows_in_transcript(history: ChatHistory, run_id: str) -> bool:
    """Whether R's transcript gives it something to show: reply text or cards, or the record of its failure
    (a failed run shows its error, seen live or not)."""
    return bool(output_from_transcript(history, run_id)) or transcript_error(history, run_id) is not None


def run_error(
    renderer: TurnRenderer, history: ChatHistory | None, row_error: str | None = None
) -> dict[str, str] | None:
    """The error a finished R shows, the same as a live error terminal shows it (``{"content": words}``).

    The live terminal decides when owc saw one: its ``errorMessage`` (a final or an aborted terminal is no
    error, whatever else says). Without it, the run failed if the session row says so (``row_error``: the
    row's ``lastRunError``, which the caller passes only while the row's ``lastRunId`` is R; measured equal to
    the live terminal's first ``errorMessage``) or the transcript does (``transcript_error``: the Gateway's own
    copy of the failure, other words than the live ones, the only ones left once a later run replaced the
    row's)."""
    if renderer.terminal is not None:
        return terminal_error(renderer)
    if row_error:
        return {"content": row_error}
    if history is not None:
        copy = transcript_error(history, renderer.run_id)
        if copy is not None:
            return {"content": copy}
    return None


#: What the Gateway (2026.9.6, ``chat-history-budget``) sends in place of a transcript message over 128 KiB.
OVERSIZED_PLACEHOLDER = "[chat.history omitted: message too large]"


def _stream_results_for_placeholders(output: list[dict[str, Any]], renderer: TurnRenderer) -> None:
    """A tool result the Gateway left out of ``chat.history`` as too large is taken from the stream, which
    carried it whole (before, the finished card showed the placeholder instead of the result)."""
    if not any(_output_text(item) == OVERSIZED_PLACEHOLDER for item in output):
        return
    streamed = {
        item["call_id"]: item["output"]
        for item in renderer.output(done=True)
        if item.get("type") == "function_call_output" and _output_text(item) not in (None, OVERSIZED_PLACEHOLDER)
    }
    for index, item in enumerate(output):
        if _output_text(item) == OVERSIZED_PLACEHOLDER and item.get("call_id") in streamed:
            output[index] = FrozenDict({**item, "output": streamed[item["call_id"]]})  # items are never changed


def _oversized(message: HistoryMessage) -> bool:
    meta = message.raw.get("__openclaw")
    return isinstance(meta, dict) and meta.get("truncated") is True and meta.get("reason") == "oversized"


def oversized_reply_in_run(history: ChatHistory, run_id: str) -> bool:
    """Whether a message missing from the transcript may be R's: an assistant message the Gateway left out as
    too large (its placeholder keeps no ``runId``), or a message owc could not read, lies between R's user turn
    (or the user turn before R's first message) and the next user turn. The transcript then lacks R's text and
    cards without saying so."""
    messages = history.messages
    start = next((i for i, m in enumerate(messages) if m.user_run_id == run_id), None)
    if start is None:
        mine = {id(m) for m in run_messages(history, run_id)}
        first = next((i for i, m in enumerate(messages) if id(m) in mine), len(messages))
        start = max((i for i in range(first) if messages[i].role == "user"), default=0)
    end = next((i for i in range(start + 1, len(messages)) if messages[i].role == "user"), len(messages))
    if any(start <= i <= end for i in history.unreadable):
        return True
    return any(m.role == "assistant" and _oversized(m) for m in messages[start:end])


def _output_text(item: dict[str, Any]) -> str | None:
    if item.get("type") != "function_call_output":
        return None
    parts = item.get("output")
    return parts[0].get("text") if isinstance(parts, list) and parts and isinstance(parts[0], dict) else None


def finish(renderer: TurnRenderer, history: ChatHistory | None, row_error: str | None = None) -> FinishedRun:
    """The finished message of a run: from the transcript when it holds the run, else from the stream. Its
    error is ``run_error``'s (``row_error``: the session row's ``lastRunError`` while its ``lastRunId`` is R)."""
    try:
        error = run_error(renderer, history, row_error)
    except Exception:  # a transcript shape owc cannot read: the live terminal alone decides
        log.exception("render.transcript_failed run=%s (error from the stream)", renderer.run_id)
        error = terminal_error(renderer)
    output = None
    if history is not None:
        try:
            if oversized_reply_in_run(history, renderer.run_id) and not renderer.gaps:
                log.warning("render.transcript_incomplete run=%s (finishing from the stream)", renderer.run_id)
            else:
                output = output_from_transcript(history, renderer.run_id)
            if output == [] and renderer.output(done=True):
                # The transcript holds the run but nothing of what it showed: a restart's empty aborted message
                # (the Gateway drops the partial: measured on 2026.9.6, NOTES "Measured on the real Gateway").
                # What was streamed is all there is of it.
                log.info("render.transcript_empty run=%s (finishing from the stream)", renderer.run_id)
                output = None
            if output is not None:
                _stream_results_for_placeholders(output, renderer)
        except Exception:  # a transcript shape owc cannot render: the streamed copy still finishes the run
            log.exception("render.transcript_failed run=%s (finishing from the stream)", renderer.run_id)
            output = None
    if output is not None:
        return FinishedRun(
            content=output_text(output),
            output=output,
            cards=count_cards(output),
            source="transcript",
            complete=True,
            error=error,
        )
    output = renderer.output(done=True)
    return FinishedRun(
        content=output_text(output),
        output=output,
        cards=count_cards(output),
        source="stream",
        complete=not renderer.gaps,
        error=error,
    )
