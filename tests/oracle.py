"""The oracle: the design's invariants checked on what a play left in the database, against what the simulated
Gateway did. It lives here, not in owc: an oracle must not share the code it judges, so it derives everything
again on its own (the identity rule, which runs showed something, their cards and texts, the order the runs
started in) from the simulator's runs and transcripts, and reads the database with plain SQL, never through
owc's renderer, finalizer, store or ids module.

Invariants (shared/design.md, issue 11), each problem tagged with its kind in brackets:

* ``[missing]`` every run on a chat's key that showed something (a tool call, or text that is not a silent
  sentinel) has a message, whose id follows from the run id: a run that showed text and got no message is a
  failure, not "a silent reply";
* ``[unfinished]`` that message is finished (``done: true``) once the run has ended, and no message at all is
  ``done: false`` once the play is quiescent (the exemptions are below);
* ``[silent]`` no message for an ``owui-action-`` run, a run on another key, or a run that said only a sentinel
  (a heartbeat runner's turn is judged as any run: one that speaks must have its message with its reply, as the
  Gateway's own chat shows it; one that only acknowledges, ``HEARTBEAT_OK`` / ``NO_REPLY``, must have none:
  issue 24 item 6, measured on 2026.9.6, ``docs/reference/gateway-errors-heartbeats-internal.md``);
* ``[duplicate]`` one message per run, and no sibling variants;
* ``[content]`` the message's tool cards are the transcript's tool calls (as many) and its text items are the
  transcript's texts, in order;
* ``[order]`` the messages of runs on one chat are chained in the order the runs started;
* ``[tree]`` ``history.currentId`` is the chain's tail and equals the row's ``current_message_id``, every parent
  exists and lists the child, every child points back, and every message is on the one chain;
* ``[mirror]`` the ``chat_message`` table matches the chat JSON: the same ids, parents, roles, content and done;
* ``[error]`` the message shows its run's error whether owc saw it live or not: a run that ended with an
  ``error`` terminal of its own (not a restart's cut) has that error's words in its message's ``error``
  (``{"content": <errorMessage>}``, as a live error gives), the last run of a chain deciding;
* ``[cutoff]`` the cut-off note (``CUT_OFF``, owc/rules/owner.py) is only on a message whose run a restart cut
  (any of the four modes the simulator played while it was active: ``Run.cut_by``) and that nobody continued:
  never on a run that ended on its own terminal, never in place of a run's own error, never once a continuation
  of the cut run finished the message;
* ``[streamed]`` never less than was streamed: the finished message holds every text item the simulator sent
  owc as chat text for its runs (``Run.streamed``, per client, even what the transcript lost), in order, prefix
  wise (see ``check_streamed`` for the exact rule, and where the run's own transcript replaces it);
* ``[seam]`` a message several runs wrote into (a cut run and its continuations) marks where each continuation's part
  begins with one seam line (issue 25 item 3: ``SEAMS``, owc/render/seam.py), exactly there: between the parts of two
  runs that both show something in it, worded for the continuing run (the Gateway's recovery, or owc's resume), and
  nowhere else (never first or last, never two in a row, never in a message of one run); see ``check_seams``;
* ``[status]`` a finished message keeps no spinning status line: the last entry of its ``statusHistory`` (what Open
  WebUI shows above the reply, shimmering while ``done: false``) is done (issue 25 item 2);
* ``[recovery]`` a Gateway restart recovery of a cut run lands in its source's message (link rule E), never in a
  message of its own, also when a newer run started on the key during the restart: once owc holds a message of
  the cut run (or the transcript names it), that message is the recovery's. One exception, where nothing owc
  reads tells which run the boot recovered (``indistinct_link``: a hidden sub-agent completion right after the cut
  run it holds, steered into it or a run of its own): owc's link to the run it holds stands.

A play that does not settle is ``[hang]`` (``tests/fuzzing.py``, on Trio's virtual clock), one that raises
``[crash]``.

Exemptions from "no ``done: false``": a placeholder (``stub``) that no run names (a dead request whose run never
came: nothing exists to finish it with), and whatever ``may_stay_open`` accepts. That hook is for issue 14's
owner rule, which keeps a run's message open on purpose while the Gateway owns the cut run (a restart-mode
abort or a crash cut whose row is still ``running``) until its recovery links in; nothing uses it before that
rule lands, so today every such message must be finished.

The run-start order is the simulator's: runs on one session key begin first come, first served (a run on a busy
session waits in its queue), so the order the simulator created them in (``sim.runs``) is the order they
started in. Messages of Pipe runs (``msg-<chat>-<M>-...``) are left out of the order: their placeholder's place
in the chain is fixed when the user sends, not when the run starts.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

NS = uuid.UUID("4fb14312-7485-5b8b-b791-6367042b3765")  # NOTES.md, "Identity rule": fixed forever
SILENT = {"NO_REPLY", "ANNOUNCE_SKIP", "HEARTBEAT_OK"}
_KEY = re.compile(
    r"^agent:[^:]+:openwebui-(?P<user>[^:]+)-(?P<chat>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$"
)
_PIPE_RUN = re.compile(r"^msg-(?P<chat>[0-9a-f-]{36})-(?P<message>[0-9a-f-]{36})-.+$")
_RESUME_RUN = re.compile(r"^msg-[0-9a-f-]{36}-[0-9a-f-]{36}-resume-.+$")

#: The kinds of problem, as the tags that start each problem's text.
KINDS = (
    "missing", "unfinished", "silent", "duplicate", "content", "order", "tree", "mirror", "expected",
    "error", "cutoff", "streamed", "recovery", "seam", "status",
)  # fmt: skip
#: How every note owc ends a cut message with begins (owc/rules/owner.py ``CUT_OFF``; copied, never imported:
#: ``tests/test_oracle.py`` checks the two agree).
CUT_OFF = "This reply was cut off"
#: The seam lines owc puts where a continuation's part begins, by the continuation's kind (owc/render/seam.py
#: ``SEAM_TEXTS``; copied, never imported: ``tests/test_oracle.py`` checks the two agree).
SEAMS = {
    "*↻ Resumed after the Gateway restarted*": "recovery",
    "*↻ Resumed by owc after the Gateway stopped*": "resume",
}
#: Sentinels owc hides and the short answers it holds back while a run streams (a prefix of one: "NO").
_SENTINEL_WORDS = ("NO_REPLY", "ANNOUNCE_SKIP", "REPLY_SKIP", "HEARTBEAT_OK")


def cards(output: list[dict[str, Any]] | None) -> list[tuple[str, str | None]]:
    """A message's tool cards as a person reads them: each card's name and its result's text (None: no result)."""
    output = output or []
    results = {
        i["call_id"]: "".join(p.get("text", "") for p in i["output"])
        for i in output
        if i.get("type") == "function_call_output"
    }
    return [(i["name"], results.get(i["call_id"])) for i in output if i.get("type") == "function_call"]


def expected_message_id(key: str, run_id: str) -> str | None:
    if run_id.startswith("owui-action-"):
        return None
    pipe = _PIPE_RUN.match(run_id)
    if pipe:
        return pipe["message"]
    return str(uuid.uuid5(NS, f"{key}:{run_id}"))


def _named(sim: Any, recovery: Any) -> bool:
    """Link rule E names the run a recovery continues from the transcript: walking back from the recovery's user
    turn (past earlier recoveries' turns), the first user turn is that run's own ``<id>:user``, with no other run's
    message after it. A run begun by another client (its user turn keyed by an id of its own, or hidden) is named
    nowhere: owc links a recovery of it only if it saw the run cut (``linked``)."""
    session = sim.sessions.get(recovery.key)
    transcript = session.transcript if session is not None else []
    at = next((i for i, m in enumerate(transcript) if m.get("idempotencyKey") == f"{recovery.run_id}:user"), None)
    if at is None:
        return False
    recoveries = {
        str(m.get("idempotencyKey"))[: -len(":user")]
        for m in transcript
        if (m.get("provenance") or {}).get("sourceTool") == "main_session_restart_recovery"
    }
    others = set()
    for message in reversed(transcript[:at]):
        if message.get("role") == "user":
            if (message.get("provenance") or {}).get("sourceTool") == "main_session_restart_recovery":
                continue
            key = str(message.get("idempotencyKey") or "")
            return key == f"{recovery.recovers}:user" and not (others - {recovery.recovers} - recoveries)
        if message.get("role") == "assistant":
            others.add((message.get("__openclaw") or {}).get("runId"))
    return False


def message_of(
    sim: Any, run: Any, linked: frozenset[str] = frozenset(), chosen: dict[str, str] | None = None
) -> str | None:
    """The message a run writes into: its own, or (a continuation) the message of the run it continues. A boot's
    restart recovery continues the run it recovers (the simulator's ground truth, ``recovers``: link rule E) when
    the transcript names that run, or when owc recorded the link itself (``linked``: the runs the database's
    messages name in ``meta.openclaw_chain``; owc may know the cut run from having streamed it); an owc resume
    (``msg-<chat>-<M>-resume-<t>``) names M itself. Followed back to the first run of the chain. ``chosen``: a
    recovery owc linked to another run than the one it recovers where nothing owc could read tells the two apart
    (``indistinct_link``): that run stands for its source."""
    seen: set[str] = set()
    while run.run_id not in seen:
        source = (chosen or {}).get(run.run_id)
        if source is None:
            source = getattr(run, "recovers", None)
            if not source or source not in sim.runs or (not _named(sim, run) and run.run_id not in linked):
                break
        if source not in sim.runs:
            break
        seen.add(run.run_id)
        run = sim.runs[source]
    return expected_message_id(run.key, run.run_id)


def _hidden_inter_session(message: dict[str, Any]) -> bool:
    """A sub-agent's completion as a user turn: ``chat.history`` hides it (the Gateway's display projection,
    ``shouldHideProjectedHistoryMessage``), whether it began a run of its own (an announce) or was steered into the
    running one (seed 000 case 10, the simulator's ``steer``)."""
    prov = message.get("provenance")
    return (
        message.get("role") == "user"
        and isinstance(prov, dict)
        and prov.get("kind") == "inter_session"
        and prov.get("sourceTool") in ("subagent_announce", "subagent_settle")
    )


def indistinct_link(sim: Any, recovery: Any, source: str) -> bool:
    """owc linked restart recovery ``recovery`` to run ``source``, which is not the run it recovers, and nothing
    owc can read tells that link from the right one (fuzz seed 150995). The transcript holds ``source``'s messages,
    the last one not ending it (a tool call or result: an abort right after a tool call stores nothing, measured),
    then only hidden sub-agent completions (at least one), then the recovery's user turn; the run the recovery
    really continues stored nothing but its own hidden turn. ``chat.history`` shows the same page whether the
    completion began a run of its own after ``source`` had ended (that run was cut and recovered) or was steered
    into ``source`` still running (``source`` cut and recovered: the Gateway's default queue mode is ``steer``,
    measured: ``effectiveQueueMode``), and the row cannot tell either: a running row has no ``lastRunId`` on
    2026.9.6 (measured: the lifecycle start clears it; after a restart cut "no lastRunId"). So owc's link to the
    cut it holds is right in one case and wrong in the other, and the oracle takes it in both.

    So too when ``source`` ended with a silent reply (``NO_REPLY``) before the completion began a run of its own
    (fuzz seed 371031): ``chat.history`` hides that reply as it hides the completion, so ``source``'s last message
    owc can read is still its tool call or result, and the seq gap after it (two hidden messages) is the same as two
    completions steered into ``source`` still running. "Ended" is judged on the messages owc can read."""
    truth = getattr(recovery, "recovers", None)
    session = sim.sessions.get(recovery.key)
    if truth is None or truth == source or session is None:
        return False
    transcript = session.transcript
    turn = next((i for i, m in enumerate(transcript) if m.get("idempotencyKey") == f"{recovery.run_id}:user"), None)
    if turn is None:
        return False
    own = [
        i
        for i, m in enumerate(transcript[:turn])
        if (m.get("__openclaw") or {}).get("runId") == source and not _silent_reply(m)
    ]
    if not own or _run_messages(transcript, truth):
        return False
    last = transcript[own[-1]]
    if last.get("openclawAbort") or last.get("stopReason") in ("stop", "error"):
        return False  # its transcript says it ended: owc can tell
    between = transcript[own[-1] + 1 : turn]
    hidden = [m for m in between if not (_silent_reply(m) and (m.get("__openclaw") or {}).get("runId") == source)]
    return bool(hidden) and all(_hidden_inter_session(m) for m in hidden)


#: The silent replies the Gateway's display projection hides from ``chat.history`` (2026.9.6,
#: ``isHeartbeatOkResponse``; the simulator's ``ACKS``).
HIDDEN_REPLIES = {"HEARTBEAT_OK", "NO_REPLY"}


def _silent_reply(message: dict[str, Any]) -> bool:
    """An assistant message that only says a silent word (``NO_REPLY``): ``chat.history`` hides it."""
    if message.get("role") != "assistant" or message.get("toolCalls") or message.get("tool_calls"):
        return False
    content = message.get("content")
    if isinstance(content, list):
        if any(isinstance(part, dict) and part.get("type") not in (None, "text") for part in content):
            return False
        content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return isinstance(content, str) and content.strip().upper() in HIDDEN_REPLIES


def chat_of(key: str) -> str | None:
    m = _KEY.match(key)
    return m["chat"] if m else None


def kind_of(problem: str) -> str:
    """The tag a problem starts with (``"[order] ..."`` -> ``"order"``)."""
    m = re.search(r"\[(\w+)\]", problem)
    return m[1] if m else ""


def _run_messages(transcript: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    out = []
    for message in transcript:
        meta = message.get("__openclaw") or {}
        keys = {meta.get("runId"), message.get("idempotencyKey"), meta.get("idempotencyKey")}
        if message.get("role") == "assistant" and ({run_id, f"cli-assistant:{run_id}", f"{run_id}:assistant"} & keys):
            out.append(message)
        elif message.get("role") == "toolResult" and meta.get("runId") == run_id:
            out.append(message)
    return out


#: A heartbeat runner's stored prompt (measured on the real Gateway 2026.9.6): ``chat.history`` hides it, and no
#: message may show it (``_check_run``).
HEARTBEAT_PROMPTS = {
    "[OpenClaw heartbeat poll]",
    "[OpenClaw cron wake]",
    "[OpenClaw exec completion]",
    "[OpenClaw session event]",
}


def _plain(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text") or "") for p in content).strip()
    return None


def _parts(messages: list[dict[str, Any]]) -> tuple[list[str], int]:
    texts: list[str] = []
    calls = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue  # a tool's result is a card's output, not the run's text
        content = message.get("content")
        for part in content if isinstance(content, list) else [{"type": "text", "text": content or ""}]:
            if part.get("type") == "toolCall":
                calls += 1
            elif part.get("type") == "text":
                # An aborted partial holds the run-wide buffer (earlier items joined by blank lines, measured on
                # the real Gateway): each item is a text of its own, and the items the run's earlier messages
                # already said are not said again.
                pieces = [p.strip() for p in str(part.get("text") or "").split("\n\n")]
                if _terminal_error_record(message):
                    pieces = pieces[1:]  # the Gateway's copy of the failure: the run's error, not its text
                pieces = [p for p in pieces if p and p not in SILENT]
                if message.get("openclawAbort") and pieces[: len(texts)] == texts:
                    pieces = pieces[len(texts) :]
                texts.extend(pieces)
    return texts, calls


def _terminal_error_record(message: dict[str, Any]) -> bool:
    """The Gateway's record of a run's failure in its transcript (measured on 2026.9.6,
    ``docs/reference/gateway-errors-heartbeats-internal.md``): keyed ``<R>:terminal-error``, its first paragraph the
    Gateway's own copy of the failure, then the run's partial text."""
    key = message.get("idempotencyKey") or (message.get("__openclaw") or {}).get("idempotencyKey") or ""
    return isinstance(key, str) and key.endswith(":terminal-error")


def _transcript_error_copy(transcript: list[dict[str, Any]], run_id: str) -> str | None:
    """The Gateway's copy of run ``run_id``'s failure in its transcript (the first paragraph of its terminal error
    record), if it has one: what the Gateway's own chat shows for it once the session row names a later run."""
    for message in reversed(_run_messages(transcript, run_id)):
        if _terminal_error_record(message):
            text = _plain(message) or ""
            return text.split("\n\n", 1)[0].strip() or None
    return None


def _output_texts(message: dict[str, Any]) -> list[str]:
    """The message's text items (Open WebUI's ``output``: ``message`` items of ``output_text`` parts), without the
    seams (``check_seams`` judges those)."""
    return [value for kind, value in _output_pieces(message) if kind == "text"]


def _output_pieces(message: dict[str, Any]) -> list[tuple[str, str]]:
    """The message's output in order, as ``("text", piece)`` (a text item's pieces, split as the run-wide buffer
    joins items), ``("seam", kind)`` (a seam line, ``SEAMS``) and ``("card", call id)`` (a tool call, the id the
    Gateway gave it: owc names a reused id's later cards ``<id>#<n>``)."""
    out: list[tuple[str, str]] = []
    for item in message.get("output") or []:
        if item.get("type") == "function_call":
            out.append(("card", str(item.get("call_id") or "").split("#", 1)[0]))
            continue
        if item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            text = str(part.get("text") or "").strip()
            if part.get("type") == "output_text" and text:
                for piece in (p.strip() for p in text.split("\n\n") if p.strip()):
                    out.append(("seam", SEAMS[piece]) if piece in SEAMS else ("text", piece))
    return out


def start_order(sim: Any) -> dict[str, int]:
    """Run id -> its place in the order runs started (per session key the simulator begins them first come,
    first served, so its creation order is the start order)."""
    return {run_id: index for index, run_id in enumerate(sim.runs)}


def chain(messages: dict[str, Any], tail: str | None) -> list[str]:
    """Ids from the root down to ``tail`` (following ``parentId``; a cycle or a dangling parent ends the walk)."""
    path: list[str] = []
    seen: set[str] = set()
    current = tail
    while isinstance(current, str) and current in messages and current not in seen:
        seen.add(current)
        path.append(current)
        current = (messages[current] or {}).get("parentId")
    return path[::-1]


def _tail(messages: dict[str, Any]) -> str | None:
    leaves = [mid for mid, m in messages.items() if not (m.get("childrenIds") or [])]
    return leaves[-1] if leaves else None


def check_order(sim: Any, name: str, messages: dict[str, Any], tail: str | None = None) -> list[str]:
    """The messages of runs on this chat are chained in the order the runs started."""
    order = start_order(sim)
    path = chain(messages, tail if tail is not None else _tail(messages))
    runs = []
    for mid in path:
        run_id = (messages[mid].get("meta") or {}).get("openclaw_run")
        if run_id and not _PIPE_RUN.match(run_id) and run_id in order:
            runs.append((order[run_id], run_id, mid))
    problems = []
    for (a, run_a, _), (b, run_b, _) in zip(runs, runs[1:]):
        if a > b:
            problems.append(
                f"{name}: [order] run {run_a[:8]} (started #{a}) is chained before run {run_b[:8]} (started #{b})"
            )
    return problems


def check(
    sim: Any,
    chats: dict[str, tuple[str, dict[str, Any]]],
    *,
    tails: dict[str, str | None] | None = None,
    may_stay_open: Callable[[dict[str, Any], Any], bool] | None = None,
) -> list[str]:
    """``chats``: chat id -> (a name for messages, the chat's ``history.messages``); ``tails``: chat id -> its
    ``history.currentId`` when known (else the chain's leaf stands for it). Returns the violations."""
    problems: list[str] = []
    by_chat_run: dict[tuple[str, str], list[str]] = {}
    for chat_id, (name, messages) in chats.items():
        for mid, message in messages.items():
            run = (message.get("meta") or {}).get("openclaw_run")
            if run:
                by_chat_run.setdefault((chat_id, run), []).append(mid)
            if len(message.get("childrenIds") or []) > 1:
                problems.append(
                    f"{name}: [duplicate] message {mid} has {len(message['childrenIds'])} children (a sibling variant)"
                )
        problems += check_order(sim, name, messages, (tails or {}).get(chat_id))
    for (chat_id, run_id), mids in by_chat_run.items():
        if len(mids) > 1:
            problems.append(f"{chats[chat_id][0]}: [duplicate] run {run_id} has {len(mids)} messages")
    linked = frozenset(
        run_id
        for _, messages in chats.values()
        for message in messages.values()
        for run_id in ((message.get("meta") or {}).get("openclaw_chain") or [])[1:]
    )
    chosen = {
        run_id: str(before)
        for _, messages in chats.values()
        for message in messages.values()
        for before, run_id in itertools.pairwise((message.get("meta") or {}).get("openclaw_chain") or [])
        if run_id in sim.runs and indistinct_link(sim, sim.runs[run_id], str(before))
    }
    named = {message_of(sim, run, linked, chosen) for run in sim.runs.values()}
    groups: dict[str | None, list[Any]] = {}
    for run in sim.runs.values():
        groups.setdefault(message_of(sim, run, linked, chosen), []).append(run)
    for run in sim.runs.values():
        chat_id = chat_of(run.key)
        if chat_id is None or chat_id not in chats:
            for cid, run_id in by_chat_run:
                if run_id == run.run_id:
                    problems.append(f"{chats[cid][0]}: [silent] run {run_id} of key {run.key} has a message here")
            continue
        group = groups.get(message_of(sim, run, linked, chosen), [run])
        if len(group) > 1:
            if run is group[0]:
                problems += _check_chain(sim, group, *chats[chat_id], may_stay_open)
            continue
        problems += _check_run(sim, run, *chats[chat_id], may_stay_open)
    for name, messages in chats.values():
        for mid, message in messages.items():
            if message.get("done") is not False:
                continue
            run_id = (message.get("meta") or {}).get("openclaw_run")
            run = sim.runs.get(run_id) if run_id else None
            chain = groups.get(mid, [])
            if run is not None and run.state == "ended" and all(r.state == "ended" for r in chain):
                continue  # reported by _check_run or _check_chain, with the run's name
            if run is None and mid not in named:
                continue  # a placeholder no run names: a dead request whose run never came
            if may_stay_open is not None and may_stay_open(message, run):
                continue
            problems.append(f"{name}: [unfinished] message {mid} is done:false after quiescence")
    problems += check_errors(sim, chats, groups)
    recovery = check_recovery(sim, chats, linked)
    problems += recovery
    problems += check_cut_off(sim, chats, groups, skip={m for p in recovery for m in re.findall(r"message (\S+)$", p)})
    problems += check_streamed(sim, chats, groups)
    problems += check_seams(sim, chats, groups)
    problems += check_status(chats)
    return problems


# ---------------------------------------------------------------------- issue 24: what a message says


def message_error(message: dict[str, Any]) -> str | None:
    """The text of a message's ``error`` (Open WebUI shows ``error.content``), or None."""
    error = message.get("error")
    if isinstance(error, dict):
        return str(error.get("content") or "") or None
    return str(error) if error else None


def has_cut_off(message: dict[str, Any]) -> bool:
    """The message ends with owc's cut-off note (in its error, where owc writes it, or in its text)."""
    return CUT_OFF in (message_error(message) or "") or CUT_OFF in str(message.get("content") or "")


def _own_error(run: Any) -> str | None:
    """The error a run ended with on its own (not the error a container stop gives every run it cuts)."""
    return getattr(run, "error", None) if getattr(run, "cut_by", None) is None else None


def _finished_groups(
    sim: Any, chats: dict[str, tuple[str, dict[str, Any]]], groups: dict[str | None, list[Any]]
) -> Iterable[tuple[str, str, dict[str, Any], list[Any]]]:
    """(chat name, message id, message, its runs in start order) for every finished message of ended runs."""
    for mid, runs in groups.items():
        if mid is None or not runs:
            continue
        chat_id = chat_of(runs[0].key)
        if chat_id is None or chat_id not in chats:
            continue
        name, messages = chats[chat_id]
        message = messages.get(mid)
        if message is None or message.get("done") is not True or any(r.state != "ended" for r in runs):
            continue
        yield name, mid, message, runs


def check_errors(
    sim: Any, chats: dict[str, tuple[str, dict[str, Any]]], groups: dict[str | None, list[Any]]
) -> list[str]:
    """Rule 1 (issue 24 item 2): a finished message whose last run ended with an error of its own shows that
    error, in the words a live error gives (the ``chat`` error terminal's ``errorMessage``). A cut-off note in its
    place is ``check_cut_off``'s to report."""
    problems = []
    for name, mid, message, runs in _finished_groups(sim, chats, groups):
        last = runs[-1]
        wanted = _own_error(last)
        if wanted is None:
            continue
        shown = message_error(message)
        if shown is not None and shown.startswith(CUT_OFF):
            continue
        session = sim.sessions.get(last.key)
        copy = _transcript_error_copy(session.transcript if session is not None else [], last.run_id)
        if shown is not None and shown == copy:
            continue  # the Gateway's own words for it (its row no longer says the live ones): shown as its chat does
        if shown is None:
            problems.append(
                f"{name}: [error] run {last.run_id} ended with the error {wanted!r} and its message {mid} shows"
                " no error"
            )
        elif shown != wanted:
            problems.append(
                f"{name}: [error] run {last.run_id} ended with the error {wanted!r} and its message {mid} shows"
                f" the error {shown[:80]!r}"
            )
    return problems


def check_cut_off(
    sim: Any,
    chats: dict[str, tuple[str, dict[str, Any]]],
    groups: dict[str | None, list[Any]],
    *,
    skip: Iterable[str] = (),
) -> list[str]:
    """Rule 2 (issue 24 item 3): the cut-off note only on a message whose run a restart cut and that nobody
    continued. ``skip``: messages ``check_recovery`` already reported (the Gateway continued their cut run)."""
    problems = []
    skipped = set(skip)
    recovered = {r.recovers for r in sim.runs.values() if getattr(r, "recovers", None)}
    for name, mid, message, runs in _finished_groups(sim, chats, groups):
        if mid in skipped or not has_cut_off(message):
            continue
        last = runs[-1]
        label = "+".join(r.run_id[:8] for r in runs) if len(runs) > 1 else last.run_id
        cut = [r for r in runs if getattr(r, "cut_by", None)]
        if _own_error(last) is not None:
            problems.append(
                f"{name}: [cutoff] the cut-off note replaces run {last.run_id}'s own error {last.error!r} in its"
                f" message {mid}"
            )
        elif not cut:
            problems.append(
                f"{name}: [cutoff] message {mid} of run {label} shows the cut-off note, and no restart cut its run"
                f" (it ended on its own {last.terminal or 'end'} terminal)"
            )
        elif not getattr(last, "cut_by", None):
            problems.append(
                f"{name}: [cutoff] message {mid} shows the cut-off note, although run {last.run_id} continued its"
                f" cut run {cut[-1].run_id[:8]} and ended on its own {last.terminal or 'end'} terminal"
            )
        elif last.run_id in recovered:
            continue  # the Gateway continued it: check_recovery judges where that continuation went
    return problems


def _streamed_items(sim: Any, run: Any, *, living: bool = True) -> list[str]:
    """The text items the simulator sent owc for ``run`` as chat text, from the longest cumulative text that
    reached a client that lived on (a client that died after it was sent, a killed owc process, shows it
    nowhere), split as the run-wide buffer joins items (a blank line); silent sentinels and short answers that
    are only the start of one (held back while a run streams) are left out. ``living=False``: any client it
    reached, dead since or not: what a message *may* show (a process that wrote a cut run's message open with its
    streamed tail, then was killed, kept it in the database: fuzz seed 40536), where ``living`` is what it must."""
    streamed = getattr(run, "streamed", None) or {}
    at = getattr(run, "streamed_at", None) or {}
    deaths = getattr(sim, "deaths", None) or []
    best = ""
    for client, text in streamed.items():
        if living and any(dead == client and when >= at.get(client, 0.0) for dead, when in deaths):
            continue
        if len(text) > len(best):
            best = text
    items = []
    for piece in best.split("\n\n"):
        piece = piece.strip()
        upper = piece.upper()
        if not piece or any(word.startswith(upper) for word in _SENTINEL_WORDS) or upper in SILENT:
            continue
        items.append(piece)
    return items


def _kept_streamed_tail(shown: list[str], texts: list[str], streamed: list[str]) -> bool:
    """The message shows the transcript's texts and then what the run streamed that its transcript lost (a stop or
    a crash stores nothing of the text it cuts: rule 3 keeps it): the transcript's items in order, the last one
    possibly longer as streamed, then streamed items past the transcript's."""
    if len(shown) < len(texts) or not streamed:
        return False
    head = shown[: len(texts)]
    if head[:-1] != texts[:-1] or (texts and not head[-1].startswith(texts[-1])):
        return False
    if texts and head[-1] != texts[-1] and head[-1] not in streamed:
        return False
    tail = shown[len(texts) :]
    rest = streamed[len(texts) :] if streamed[: len(texts) - 1] == texts[:-1] else streamed
    return all(item in rest for item in tail) and len(tail) <= len(rest)


def _replaced(streamed: list[str], kept: list[str]) -> bool:
    """The run's transcript replaced what it streamed: at some item both say, neither starts the other."""
    return any(not (k.startswith(s) or s.startswith(k)) for s, k in zip(streamed, kept))


def check_streamed(
    sim: Any, chats: dict[str, tuple[str, dict[str, Any]]], groups: dict[str | None, list[Any]]
) -> list[str]:
    """Rule 3 (issue 24 item 5), never less than was streamed. For each finished message, the streamed items
    of its runs (``_streamed_items``, chain order) must appear among the message's text items (its ``output``'s
    ``output_text`` parts, split at blank lines) in order, each item equal to a later shown item, except the last
    item of each run, which may be a prefix of one (the run was cut mid-item, or the item went on). A run whose
    own transcript replaced what it streamed (``_replaced``: an item the transcript keeps that the streamed one
    does not start, nor it the streamed one) is judged by its transcript alone (``[content]``). A run that
    streamed visible text to a live client and has no message at all, while its transcript shows nothing (else
    ``[missing]`` says it), is reported here too."""
    problems = []
    for run in sim.runs.values():
        mid = message_of(sim, run)
        chat_id = chat_of(run.key)
        if mid is None or chat_id is None or chat_id not in chats or run.state != "ended":
            continue
        name, messages = chats[chat_id]
        owned = any(run in g for key, g in groups.items() if key in messages)
        if owned:
            continue
        items = _streamed_items(sim, run)
        session = sim.sessions.get(run.key)
        texts, calls = _parts(_run_messages(session.transcript if session is not None else [], run.run_id))
        if items and not texts and not calls:
            problems.append(f"{name}: [streamed] run {run.run_id} streamed {items[0][:60]!r} to owc and has no message")
    for name, mid, message, runs in _finished_groups(sim, chats, groups):
        shown = [t for t in _output_texts(message) if t not in SILENT]
        at = 0
        for run in runs:
            items = _streamed_items(sim, run)
            session = sim.sessions.get(run.key)
            kept, _ = _parts(_run_messages(session.transcript if session is not None else [], run.run_id))
            if not items or _replaced(items, kept):
                continue
            for index, item in enumerate(items):
                last = index == len(items) - 1
                while at < len(shown) and not (shown[at] == item or (last and shown[at].startswith(item))):
                    at += 1
                if at == len(shown):
                    problems.append(
                        f"{name}: [streamed] run {run.run_id} streamed {item[:60]!r} and its message {mid} lacks it"
                        f" (in order); shows {[t[:40] for t in shown]!r}"
                    )
                    break
                at += 1
            else:
                continue
            break
    return problems


def _seam_kind(run: Any) -> str:
    """The seam a continuing run's part begins with: owc's resume (its run id ``msg-<chat>-<M>-resume-<n>``) or the
    Gateway's recovery (any other run)."""
    return "resume" if _RESUME_RUN.match(run.run_id) else "recovery"


def _pieces_of(sim: Any, run: Any) -> tuple[set[str], set[str]]:
    """What of ``run`` a message may show: its text pieces (its transcript's, what it streamed to any client, its
    live text) and its tool calls' ids (its transcript's)."""
    session = sim.sessions.get(run.key)
    messages = _run_messages(session.transcript if session is not None else [], run.run_id)
    texts, _ = _parts(messages)
    pieces = set(texts) | set(_streamed_items(sim, run, living=False))
    pieces |= {p.strip() for p in str(getattr(run, "text", "") or "").split("\n\n") if p.strip()}
    calls = {
        str(part.get("id"))
        for message in messages
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") == "toolCall"
    }
    return pieces, calls


def _of_run(value: str, kind: str, pieces: set[str], calls: set[str]) -> bool:
    if kind == "card":
        return value in calls
    # A piece as shown: whole, cut short (a cut mid-item), or longer than the transcript kept (the stream went on).
    return any(value == p or p.startswith(value) or value.startswith(p) for p in pieces)


def check_seams(
    sim: Any, chats: dict[str, tuple[str, dict[str, Any]]], groups: dict[str | None, list[Any]]
) -> list[str]:
    """Rule 6 (issue 25 item 3): a continued message marks each seam, exactly there. For every finished message of
    ended runs: a message of one run holds no seam line; a message of a chain (its runs in start order) is cut by
    its seam lines into parts, none empty (a seam is never first, last, or next to another), each part shows one
    run's items only (its text pieces and tool calls, as ``_pieces_of`` says: a part showing two runs' items lacks
    the seam between them), the parts' runs follow the chain's order, and the seam before a part names its run's
    kind (``_seam_kind``). Items no run can be told by (a text neither run's pieces hold) are left to
    ``[content]``; a part of such items alone stands for any run after the one before it."""
    problems = []
    for name, mid, message, runs in _finished_groups(sim, chats, groups):
        pieces = _output_pieces(message)
        seams = [value for kind, value in pieces if kind == "seam"]
        label = "+".join(r.run_id[:8] for r in runs) if len(runs) > 1 else runs[0].run_id
        if len(runs) == 1:
            if seams:
                problems.append(f"{name}: [seam] message {mid} of the one run {label} shows a seam line ({seams[0]})")
            continue
        parts: list[list[tuple[str, str]]] = [[]]
        kinds: list[str | None] = [None]
        for kind, value in pieces:
            if kind == "seam":
                parts.append([])
                kinds.append(value)
            else:
                parts[-1].append((kind, value))
        if any(not part for part in parts) and seams:
            problems.append(
                f"{name}: [seam] message {mid} of runs {label} has a seam line with nothing on one side of it"
                f" (first, last, or next to another): {[k for k, _ in pieces]}"
            )
            continue
        of = [_pieces_of(sim, run) for run in runs]
        last = -1
        for index, (part, seam) in enumerate(zip(parts, kinds)):
            told = [
                {i for i, (texts, calls) in enumerate(of) if _of_run(value, kind, texts, calls)} for kind, value in part
            ]
            told = [t for t in told if t]
            if not told:
                continue  # nothing in it tells its run: [content] judges what it shows
            common = set.intersection(*told)
            if not common:
                problems.append(
                    f"{name}: [seam] message {mid} of runs {label} shows the parts of two runs with no seam between"
                    f" them (part {index}: {[v[:30] for _, v in part]})"
                )
                break
            later = sorted(i for i in common if i > last)
            if not later:
                problems.append(
                    f"{name}: [seam] message {mid} of runs {label}: part {index} is of a run before the part ahead of"
                    " it (a seam out of place)"
                )
                break
            last = later[0]
            if seam is not None and seam != _seam_kind(runs[last]):
                problems.append(
                    f"{name}: [seam] message {mid}: the seam before run {runs[last].run_id}'s part says {seam}, and"
                    f" that run is a {_seam_kind(runs[last])}"
                )
                break
    return problems


def check_status(chats: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
    """Rule 7 (issue 25 item 2): a finished message (``done: true``) keeps no open status line: Open WebUI shows the
    last ``statusHistory`` entry above the reply, spinning while it says ``done: false`` (its bug #21350 leaves
    progress rows spinning after a Stop; owc's must not). Every entry has Open WebUI's shape."""
    problems = []
    for name, messages in chats.values():
        for mid, message in messages.items():
            history = message.get("statusHistory")
            if history is None:
                continue
            if not isinstance(history, list) or not all(
                isinstance(e, dict) and isinstance(e.get("description"), str) and isinstance(e.get("done"), bool)
                for e in history
            ):
                problems.append(f"{name}: [status] message {mid}'s statusHistory is not a list of status lines")
                continue
            if message.get("done") is True and history and history[-1]["done"] is not True:
                problems.append(
                    f"{name}: [status] message {mid} is finished and its status line still spins:"
                    f" {history[-1]['description']!r}"
                )
    return problems


def _root(sim: Any, run: Any) -> Any:
    """The first run of a run's recovery chain (a recovery of a cut recovery of ... a cut run)."""
    seen = set()
    while getattr(run, "recovers", None) in sim.runs and run.run_id not in seen:
        seen.add(run.run_id)
        source = sim.runs[run.recovers]
        if not getattr(source, "cut_by", None):
            break
        run = source
    return run


def check_recovery(sim: Any, chats: dict[str, tuple[str, dict[str, Any]]], linked: frozenset[str]) -> list[str]:
    """Rule 4 (issue 24 item 4): the Gateway's restart recovery R' of a cut run S writes into S's message M
    (link rule E: R' is in M's ``meta.openclaw_chain``), never into a message of its own, whatever ran on the key
    between them. It applies once M exists as S's (owc saw S) or the transcript names S (``_named``); a recovery
    of a run owc never knew and the transcript cannot name has a message of its own, rightly."""
    problems = []
    for recovery in sim.runs.values():
        source = sim.runs.get(getattr(recovery, "recovers", None) or "")
        chat_id = chat_of(recovery.key)
        if source is None or not getattr(source, "cut_by", None) or chat_id is None or chat_id not in chats:
            continue
        name, messages = chats[chat_id]
        root = _root(sim, source)
        target = expected_message_id(root.key, root.run_id)
        message = messages.get(target) if target is not None else None
        if message is None and not _named(sim, recovery):
            continue
        if message is None or (message.get("meta") or {}).get("openclaw_run") != root.run_id:
            continue  # no message of the cut run: [missing] says so where one is owed
        chain_ids = (message.get("meta") or {}).get("openclaw_chain") or []
        own = expected_message_id(recovery.key, recovery.run_id)
        if own in messages and (messages[own].get("meta") or {}).get("openclaw_run") == recovery.run_id:
            problems.append(
                f"{name}: [recovery] the Gateway's recovery {recovery.run_id} of cut run {source.run_id} has a"
                f" message of its own ({own}), not its source's message {target}"
            )
        elif recovery.run_id not in chain_ids and recovery.state == "ended":
            session = sim.sessions.get(recovery.key)
            texts, calls = _parts(_run_messages(session.transcript if session is not None else [], recovery.run_id))
            if texts or calls:
                problems.append(
                    f"{name}: [recovery] the Gateway's recovery {recovery.run_id} of cut run {source.run_id} is not in"
                    f" its source's message {target}"
                )
    return problems


def _check_run(
    sim: Any, run: Any, name: str, messages: dict[str, Any], may_stay_open: Callable[..., bool] | None
) -> list[str]:
    session = sim.sessions.get(run.key)
    transcript = session.transcript if session is not None else []
    texts, calls = _parts(_run_messages(transcript, run.run_id))
    mid = expected_message_id(run.key, run.run_id)
    # A run cut by a crash persisted nothing of what it showed live: a message is allowed for that (owc may
    # have streamed it), not required (owc may have been away: nobody can show what nobody kept).
    live = [p.strip() for p in run.text.split("\n\n") if p.strip() and p.strip() not in SILENT]
    shows = (calls > 0 or bool(texts)) and mid is not None
    may_show = (shows or bool(live)) and mid is not None
    owned = mid is not None and (messages.get(mid, {}).get("meta") or {}).get("openclaw_run") == run.run_id
    problems: list[str] = []
    if not shows:
        if owned and not may_show:
            return [f"{name}: [silent] run {run.run_id} showed nothing (or never may) and has message {mid}"]
        if not owned:
            return problems
        # A crash-cut run's message of what it streamed: allowed, and finished like any other (its transcript
        # holds nothing to compare the content with).
    message = messages.get(mid) if mid is not None else None
    if message is None:
        return [
            f"{name}: [missing] run {run.run_id} showed something ({calls} tool calls, {len(texts)} texts)"
            f" and has no message {mid}"
        ]
    content = str(message.get("content") or "")
    if prompts := [p for p in HEARTBEAT_PROMPTS if p in content]:
        # The Gateway hides a heartbeat runner's placeholder prompt from every chat surface (measured): a message
        # never shows it, whatever run it is.
        problems.append(f"{name}: [content] run {run.run_id}'s message {mid} shows the hidden prompt {prompts[0]!r}")
    if run.state != "ended":
        return problems
    if message.get("done") is not True:
        if may_stay_open is None or not may_stay_open(message, run):
            problems.append(f"{name}: [unfinished] run {run.run_id} has ended and its message {mid} is not done")
        return problems
    cards = sum(1 for item in message.get("output") or [] if item.get("type") == "function_call")
    if cards != calls and shows:
        problems.append(f"{name}: [content] run {run.run_id}'s message has {cards} tool cards, its transcript {calls}")
    content = message.get("content") or ""
    for text in texts:
        if text not in content:
            problems.append(f"{name}: [content] run {run.run_id}'s message lacks its text {text[:60]!r}")
    shown = [t for t in _output_texts(message) if t not in SILENT]
    if (
        shows
        and not any("lacks its text" in p for p in problems)
        and shown != texts
        and not _kept_streamed_tail(shown, texts, _streamed_items(sim, run, living=False))
    ):
        problems.append(
            f"{name}: [content] run {run.run_id}'s message shows the texts {shown!r}, its transcript {texts!r}"
        )
    return problems


def _check_chain(
    sim: Any, runs: list[Any], name: str, messages: dict[str, Any], may_stay_open: Callable[..., bool] | None
) -> list[str]:
    """A message several runs write into (a cut run and its continuations, in start order): it exists if any of
    them showed something, is finished once the last has ended, and holds each run's transcript texts in order
    (a run a crash cut stored nothing, so what it streamed may be there too) and at least their tool cards."""
    first = runs[0]
    mid = expected_message_id(first.key, first.run_id)
    per_run = []
    for run in runs:
        session = sim.sessions.get(run.key)
        texts, calls = _parts(_run_messages(session.transcript if session is not None else [], run.run_id))
        per_run.append((run, texts, calls))
    shows = any(texts or calls for _, texts, calls in per_run)
    message = messages.get(mid) if mid is not None else None
    label = "+".join(r.run_id[:8] for r in runs)
    if message is None:
        return [f"{name}: [missing] runs {label} showed something and have no message {mid}"] if shows else []
    if any(r.state != "ended" for r in runs):
        return []
    if message.get("done") is not True:
        if may_stay_open is None or not may_stay_open(message, runs[-1]):
            return [f"{name}: [unfinished] runs {label} have ended and their message {mid} is not done"]
        return []
    problems = []
    cards = sum(1 for item in message.get("output") or [] if item.get("type") == "function_call")
    wanted = sum(calls for _, _, calls in per_run)
    if cards < wanted:
        problems.append(f"{name}: [content] runs {label}'s message has {cards} tool cards, their transcripts {wanted}")
    shown = [t for t in _output_texts(message) if t not in SILENT]
    expected = [t for _, texts, _ in per_run for t in texts]
    at = 0
    for text in expected:  # in order, each once (a crash-cut run's streamed text may come between)
        while at < len(shown) and shown[at] != text:
            at += 1
        if at == len(shown):
            problems.append(f"{name}: [content] runs {label}'s message lacks {text[:60]!r} (in order); shows {shown!r}")
            break
        at += 1
    return problems


# ---------------------------------------------------------------------- the database as Open WebUI sees it


@dataclass
class ChatRow:
    """One ``chat`` row and its ``chat_message`` rows, read with plain SQL."""

    chat_id: str
    chat: dict[str, Any]
    current_message_id: str | None
    mirror: dict[str, dict[str, Any]] = field(default_factory=dict)  # message id -> its row

    @property
    def messages(self) -> dict[str, Any]:
        return ((self.chat or {}).get("history") or {}).get("messages") or {}

    @property
    def current_id(self) -> str | None:
        return ((self.chat or {}).get("history") or {}).get("currentId")


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def read_chats(db_url: str, chat_ids: Iterable[str]) -> dict[str, ChatRow]:
    """The chats' rows and their mirror rows (SQLAlchemy Core with literal SQL: no owc code)."""
    from sqlalchemy import create_engine, text

    wanted = list(chat_ids)
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows: dict[str, ChatRow] = {}
            for chat_id in wanted:
                row = conn.execute(
                    text("SELECT id, chat, current_message_id FROM chat WHERE id = :id"), {"id": chat_id}
                ).first()
                if row is None:
                    continue
                rows[chat_id] = ChatRow(chat_id, _json(row.chat) or {}, row.current_message_id)
                for m in conn.execute(
                    text("SELECT id, role, parent_id, content, done FROM chat_message WHERE chat_id = :id"),
                    {"id": chat_id},
                ):
                    prefix = f"{chat_id}-"
                    mid = m.id[len(prefix) :] if m.id.startswith(prefix) else m.id
                    rows[chat_id].mirror[mid] = {
                        "role": m.role,
                        "parent_id": m.parent_id,
                        "content": _json(m.content),
                        "done": None if m.done is None else bool(m.done),
                    }
            return rows
    finally:
        engine.dispose()


def check_tree(name: str, row: ChatRow) -> list[str]:
    """``currentId`` is the tail, the column agrees with it, parents and children agree, one chain holds all."""
    messages = row.messages
    problems: list[str] = []
    current = row.current_id
    if row.current_message_id != current:
        problems.append(
            f"{name}: [tree] current_message_id {row.current_message_id} is not history.currentId {current}"
        )
    if not messages:
        if current is not None:
            problems.append(f"{name}: [tree] currentId {current} in a chat with no messages")
        return problems
    if current not in messages:
        return problems + [f"{name}: [tree] currentId {current} is not a message of the chat"]
    if messages[current].get("childrenIds"):
        problems.append(f"{name}: [tree] currentId {current} is not the tail (it has children)")
    roots = []
    for mid, message in messages.items():
        if message.get("id", mid) != mid:
            problems.append(f"{name}: [tree] message {mid} says its id is {message.get('id')}")
        parent = message.get("parentId")
        if parent is None:
            roots.append(mid)
        elif parent not in messages:
            problems.append(f"{name}: [tree] message {mid}'s parent {parent} does not exist")
        elif mid not in (messages[parent].get("childrenIds") or []):
            problems.append(f"{name}: [tree] message {mid} is not among its parent {parent}'s children")
        for child in message.get("childrenIds") or []:
            if child not in messages or messages[child].get("parentId") != mid:
                problems.append(f"{name}: [tree] message {mid} lists child {child}, which does not point back")
    if len(roots) != 1:
        problems.append(f"{name}: [tree] {len(roots)} roots")
    on_chain = set(chain(messages, current))
    off = [mid for mid in messages if mid not in on_chain]
    if off:
        problems.append(f"{name}: [tree] {len(off)} messages are off the chain that ends at currentId: {off[:3]}")
    return problems


def check_mirror(name: str, row: ChatRow) -> list[str]:
    """The ``chat_message`` rows are the chat JSON's messages: ids, parents, roles, content and done."""
    problems: list[str] = []
    messages, mirror = row.messages, row.mirror
    for mid in messages.keys() - mirror.keys():
        problems.append(f"{name}: [mirror] message {mid} has no chat_message row")
    for mid in mirror.keys() - messages.keys():
        problems.append(f"{name}: [mirror] chat_message row {mid} is no message of the chat JSON")
    for mid in messages.keys() & mirror.keys():
        message, m = messages[mid], mirror[mid]
        # Open WebUI's upsert_message stores ``done`` as given and a message without it as done (a user turn).
        want = {
            "role": message.get("role"),
            "parent_id": message.get("parentId"),
            "content": message.get("content"),
            "done": bool(message.get("done", True)),
        }
        for column, value in want.items():
            if m[column] != value:
                problems.append(f"{name}: [mirror] {mid} {column}: row {m[column]!r:.80} vs chat JSON {value!r:.80}")
    return problems


def check_database(
    sim: Any,
    db_url: str,
    names: dict[str, str],
    *,
    may_stay_open: Callable[[dict[str, Any], Any], bool] | None = None,
) -> list[str]:
    """Every invariant on what the database holds. ``names``: chat id -> the scenario's name for it."""
    rows = read_chats(db_url, names)
    problems: list[str] = []
    for chat_id, name in names.items():
        if chat_id not in rows:
            problems.append(f"{name}: [tree] chat row {chat_id} is missing")
    chats = {cid: (names[cid], row.messages) for cid, row in rows.items()}
    tails = {cid: row.current_id for cid, row in rows.items()}
    problems += check(sim, chats, tails=tails, may_stay_open=may_stay_open)
    for cid, row in rows.items():
        problems += check_tree(names[cid], row) + check_mirror(names[cid], row)
    return problems


def check_expected(
    expect: dict[str, str],
    order: dict[str, list[str]],
    sim: Any,
    run_ids: dict[str, str],
    chats: dict[str, tuple[str, str, dict[str, Any]]],
) -> list[str]:
    """What the schedule's generator said it must produce, against the database. ``expect``: run name ->
    ``show`` / ``silent`` / ``may``; ``order``: chat name -> the names of its runs that must show, in start
    order; ``chats``: chat name -> (chat id, session key, history.messages)."""
    problems: list[str] = []
    writers = {
        (m.get("meta") or {}).get("openclaw_run"): (cname, mid)
        for cname, (_, _, messages) in chats.items()
        for mid, m in messages.items()
    }
    # A message holds its run, and every run of its chain: a cut run shows in its continuation's message (and a
    # cut run that showed nothing itself is still silent when its continuation shows: only the writer counts).
    owners = {
        run_id: (cname, mid)
        for cname, (_, _, messages) in chats.items()
        for mid, m in messages.items()
        for run_id in ((m.get("meta") or {}).get("openclaw_chain") or [])
    } | writers
    for run, what in expect.items():
        run_id = run_ids.get(run)
        if run_id is None:
            continue
        where = owners.get(run_id)
        if what == "show" and where is None:
            problems.append(f"[expected] run {run} must show and has no message")
        elif what == "show" and chats[where[0]][2][where[1]].get("done") is not True:
            problems.append(f"[expected] run {run}'s message is not done")
        elif what == "silent" and (where := writers.get(run_id)) is not None:
            problems.append(f"[expected] run {run} must not show and has message {where[1]} in {where[0]}")
    for cname, runs in order.items():
        if cname not in chats:
            continue
        _, key, messages = chats[cname]
        ids = {expected_message_id(key, run_ids[r]): r for r in runs if r in run_ids}
        chained = [ids[mid] for mid in chain(messages, _tail(messages)) if mid in ids]
        if chained != [r for r in runs if expected_message_id(key, run_ids.get(r, "")) in messages]:
            problems.append(f"{cname}: [order] runs chained as {chained}, started as {runs} (the generator's count)")
    return problems
