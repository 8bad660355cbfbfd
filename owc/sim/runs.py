"""Driving runs: start, queue, play steps, and emit each step's events in the order the real Gateway does.

A run is driven either by a script the simulator plays (``chat.send`` and recovery runs: ``RunDriver``
plays their steps in a task) or step by step through a ``SimRun`` handle (runs "other clients" start: cron,
sessions_send, sub-agent announces, heartbeats). Both go through the same ``text`` / ``tool_*`` / ``end``,
so a scripted run and a hand-driven one put the same frames on the wire.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio
import trio.lowlevel

from owc.sim import model as m
from owc.sim import questions as q
from owc.sim.delivery import Fanout, everyone, subscribers
from owc.sim.media import MediaStore, refused_block
from owc.sim.questions import Questions, SimQuestion
from owc.sim.script import DEFAULT_ASK_TIMEOUT_S, Ask, Delay, End, Hold, Media, Spawn, Step, Text, Then, Tool


def _no_spawner(run: m.Run, step: Spawn) -> Any:
    raise RuntimeError("this driver has no sub-agents (the simulator sets RunDriver.spawner)")


def _tool_item(
    call_id: str, name: str, phase: str, status: str, fields: Mapping[str, Any] | None = None, **at: Any
) -> dict[str, Any]:
    """A tool call on the ``agent`` ``item`` stream (``startedAt`` at its start, ``endedAt`` at its end). ``fields``:
    a tool's own ``title`` and ``meta`` (``ask_user``'s, measured), and ``error`` at a failed end."""
    fields = fields or {}
    item = {
        "itemId": f"tool:{call_id}", "toolCallId": call_id, "name": name, "kind": "tool", "phase": phase,
        "title": fields.get("title", name.title()), "status": status,
    }  # fmt: skip
    if "meta" in fields:
        item["meta"] = fields["meta"]
    item.update(at)
    if "error" in fields:
        item["error"] = fields["error"]
    return item


@attrs.frozen
class Asked:
    """What an ``Ask`` step did: its tool call, and the question it raised or the tool's refusal (``error``)."""

    call_id: str
    question: SimQuestion | None
    error: str | None = None


@attrs.frozen
class Pending:
    """What a started run still has to do when it begins (at once, or when it leaves its session's queue)."""

    user_text: str | None
    provenance: dict[str, Any] | None
    steps: Sequence[Step] | None
    from_send: bool = False
    #: The run's input as a whole stored message (a sub-agent's task, an announce), instead of ``user_text``: pushed
    #: as ``session.message`` unless the display projection hides it (an announce: measured, neither shown nor
    #: pushed).
    input_message: dict[str, Any] | None = None


class SimRun:
    """A test's handle on one run: every method emits the run's events at once, in order."""

    def __init__(self, driver: RunDriver, run: m.Run) -> None:
        self._driver = driver
        self.run = run

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def active(self) -> bool:
        return self.run.state == "active"

    def text(self, text: str, chunks: Sequence[str] | None = None) -> SimRun:
        self._driver.text(self.run, Text(text, tuple(chunks) if chunks is not None else None))
        return self

    def tool(
        self, name: str, args: Any = None, result: Any = "", *, is_error: bool = False, call_id: str | None = None
    ) -> SimRun:
        call_id = self.tool_start(name, args, call_id=call_id)
        self.tool_result(call_id, result, is_error=is_error)
        return self

    def tool_start(self, name: str, args: Any = None, *, call_id: str | None = None) -> str:
        return self._driver.tool_start(self.run, name, {} if args is None else args, call_id)

    def tool_result(self, call_id: str, result: Any = "", *, is_error: bool = False) -> SimRun:
        self._driver.tool_result(self.run, call_id, result, is_error)
        return self

    def media(self, name: str, mime: str, data: bytes = b"", *, refused: str | None = None) -> SimRun:
        """The model's answer names a file (a ``Media`` step): announced now, delivered after the run's final."""
        self._driver.media(self.run, Media(name, mime, data, refused))
        return self

    def end(
        self, state: str = "final", *, yielded: bool = False, error: str | None = None, stop_reason: str | None = None
    ) -> SimRun:
        self._driver.end(self.run, End(state, yielded, error, stop_reason))
        return self

    def release(self) -> None:
        """Let a run holding on a ``Hold`` step play its remaining steps."""
        self._driver.release(self.run)

    def ask(
        self,
        questions: Sequence[Mapping[str, Any]],
        *,
        timeout_s: float = DEFAULT_ASK_TIMEOUT_S,
        call_id: str | None = None,
    ) -> str | None:
        """The model calls ``ask_user`` (an ``Ask`` step): returns the question's id, None when the tool refused
        the arguments (the run got the error result). It does not wait: answer it (``question.resolve``, a
        ``chat.send``, ``sim.questions.answer`` / ``cancel``) or let it expire, and the run gets its tool result
        then; drive the run on afterwards (``text``, ``end``)."""
        asked = self._driver.ask(self.run, Ask(tuple(dict(x) for x in questions), timeout_s, call_id))
        return asked.question.id if asked.question is not None else None

    @property
    def question(self) -> SimQuestion | None:
        """The run's pending question, if it is waiting on one."""
        return self._driver.questions.pending_of_run(self.run_id)

    def spawn(
        self,
        task: str,
        label: str | None = None,
        *,
        steps: Sequence[Step] | None = None,
        announce: Sequence[Step] | None = None,
        call_id: str | None = None,
    ) -> Any:
        """The model spawns a sub-agent (a ``Spawn`` step: ``sessions_spawn``'s call and its ``accepted`` result on this
        run, the task record, the child's run playing ``steps``, or driven through the returned ``tasks.Spawned``'s
        ``child`` when None). The announce run follows the child's end on this run's key (``owc.sim.tasks``)."""
        step = Spawn(
            task, label, None if steps is None else tuple(steps), None if announce is None else tuple(announce)
        )
        return self._driver.spawner(self.run, attrs.evolve(step, call_id=call_id))

    def steer(self, text: str, provenance: dict[str, Any] | None = None) -> SimRun:
        """An input steered into the running run (a sub-agent's completion while its parent runs, seed 000
        case 10): no run of its own; the run goes on with it in its context."""
        self._driver.steer(self.run, text, provenance)
        return self


class RunDriver:
    """Owns the runs' life: the agent sessions and runs (dicts shared with the Simulator), the queue of
    runs waiting to begin, the tasks playing scripts and the holds they wait on."""

    def __init__(
        self,
        nursery: trio.Nursery,
        fanout: Fanout,
        sessions: dict[str, m.AgentSession],
        runs: dict[str, m.Run],
        *,
        now_ms: Callable[[], int],
        poke: Callable[[], None],
        cli_runtime: bool,
        questions: Questions,
        media: MediaStore,
    ) -> None:
        self._nursery = nursery
        #: The Gateway's managed media: where a run's ``Media`` files go at its delivery.
        self.media_store = media
        #: How long after a run's final its files are delivered (the transcript rewritten and announced), in seconds
        #: on Trio's clock: 0.1 to 2.4 s live (docs/measured/media-2026.9.6.md section 2); 0 delivers at the next
        #: checkpoint, still after the final.
        self.media_delay = 0.1
        self._fanout = fanout
        #: The Gateway's question manager: ``Ask`` steps raise questions there, and it tells the run when one ends.
        self.questions = questions
        questions.settled = self._question_settled
        self.sessions = sessions
        self.runs = runs
        self._now_ms = now_ms
        self._poke = poke
        self.cli_runtime = cli_runtime
        self.cli_keys: set[str] = set()  # session keys whose runs use the CLI runtime whatever ``cli_runtime`` says
        self.plays: dict[str, trio.CancelScope] = {}  # run id -> the task playing its steps
        self.pending: dict[str, Pending] = {}  # started runs that have not begun (queued, or within start_run)
        self._holds: dict[str, trio.Event] = {}
        self._items: dict[tuple[str, str], dict[str, Any]] = {}  # (run id, call id) -> a tool's own item fields
        #: Called with a session key before a run (not a heartbeat's, not a recovery) is admitted there:
        #: ``Restarts`` starts a boot's recovery of that session first if it is still pending.
        self.admitting: Callable[[str], None] = lambda _key: None
        #: Told of each run's moments (``"begin"``, ``"tool_start"`` with the tool's name, ``"tool_result"``, ``"end"``
        #: once its terminal is out, before the row's settled pushes): ``tasks.Tasks`` keeps its records by it.
        self.observe: Callable[[m.Run, str, str | None], None] = lambda _run, _moment, _name: None
        #: What a ``Spawn`` step does (``tasks.Tasks.spawn``; set by the simulator).
        self.spawner: Callable[[m.Run, Spawn], Any] = _no_spawner

    def now_ms(self) -> int:
        """The Gateway's clock (Trio's), in ms."""
        return self._now_ms()

    def session(self, key: str) -> m.AgentSession:
        """The agent session ``key``, created on first use."""
        session = self.sessions.get(key)
        if session is None:
            now = self._now_ms()
            session = self.sessions[key] = m.AgentSession(key=key, created_at=now, updated_at=now)
        return session

    def active_run(self, key: str) -> SimRun | None:
        session = self.sessions.get(key)
        return SimRun(self, session.active) if session is not None and session.active is not None else None

    def handle(self, run_id: str) -> SimRun:
        return SimRun(self, self.runs[run_id])

    def start_run(
        self,
        key: str,
        run_id: str | None = None,
        *,
        origin: str = "cron",
        heartbeat: bool = False,
        user_text: str | None = None,
        provenance: dict[str, Any] | None = None,
        hide_ids: bool = False,
        steps: Sequence[Step] | None = None,
        owner: str | None = None,
        owner_device: str | None = None,
        cli_runtime: bool | None = None,
        input_message: dict[str, Any] | None = None,
        spawned_by: str | None = None,
    ) -> SimRun:
        """Start a run on ``key`` as another client would (cron, sessions_send, a sub-agent announce, a
        heartbeat): no connection of ours owns it. With ``steps`` the simulator plays them; without, the
        caller drives the run through the returned handle. A run on a busy session waits in its queue.
        ``cli_runtime``: this run's runtime (default: the simulator's, or the key's in ``cli_keys``). ``input_message``:
        the run's input as a stored message (``Pending``); ``spawned_by``: a sub-agent's parent key."""
        if cli_runtime is None:
            cli_runtime = self.cli_runtime or key in self.cli_keys
        run = m.Run(
            run_id=run_id or str(uuid.uuid4()),
            key=key,
            owner=owner,
            owner_device=owner_device,
            heartbeat=heartbeat,
            origin=origin,
            hide_ids=hide_ids or cli_runtime,
            cli_runtime=cli_runtime,
            spawned_by=spawned_by,
        )
        if run.run_id in self.runs:
            raise ValueError(f"run {run.run_id} already exists")
        if not heartbeat and origin != "recovery":
            self.admitting(key)  # a recovery the boot still owes this session runs first
        self.runs[run.run_id] = run
        session = self.session(key)
        pending = Pending(user_text, provenance, steps, from_send=origin == "chat.send", input_message=input_message)
        self.pending[run.run_id] = pending
        if session.active is not None:
            session.queued.append(run)
        else:
            self._begin(session, run)
        return SimRun(self, run)

    def inject_reply(self, key: str, run_id: str, user_text: str, text: str) -> None:
        """A ``chat.send`` the Gateway answers itself (an unsupported thinking level, measured on 2026.9.6): the run's
        only ``chat`` event is a ``final`` carrying the injected message (``provider: "openclaw"``, ``model:
        "gateway-injected"``), stored in the transcript; no ``agent`` event, no model call, and the row's
        ``lastRunId`` and counters untouched. (The user message is stored before it here: not measured.)"""
        session = self.session(key)
        now = self._now_ms()
        run = m.Run(run_id=run_id, key=key, origin="chat.send", state="ended", terminal="final")
        self.runs[run_id] = run
        self._push(session, run, session.append(m.user_message(run_id, user_text, now), now))
        message = session.append(m.thinking_rejected_message(run_id, text, now), now)
        self._push(session, run, message)
        shown = {k: v for k, v in message.items() if k != "__openclaw"}
        self._fanout.chat(run, "final", drop_if_slow=False, message=shown)

    def cancel_queued(self, session: m.AgentSession, run_id: str | None = None) -> list[str]:
        """Take runs that have not begun out of the session's queue (all, or the one ``run_id``); they end
        without any event, as the Gateway's in-memory queue forgets them."""
        cancelled: list[str] = []
        for queued in list(session.queued):
            if run_id is None or queued.run_id == run_id:
                session.queued.remove(queued)
                self.pending.pop(queued.run_id, None)
                queued.state = "ended"
                cancelled.append(queued.run_id)
        return cancelled

    def _begin(self, session: m.AgentSession, run: m.Run) -> None:
        fanout = self._fanout
        pending = self.pending.pop(run.run_id)
        now = self._now_ms()
        session.active = run
        session.status = "running"
        session.started_at, session.ended_at, session.updated_at = now, None, now
        if pending.from_send:
            fanout.sessions_changed(session, reason="send")
            fanout.sessions_changed(session, reason="participants")
        if run.heartbeat:
            # The heartbeat runner stores a placeholder prompt, not the run's own user turn; nobody is shown it.
            source = "cron" if run.origin == "cron" else "heartbeat"
            fanout.hidden_message(session, session.append(m.heartbeat_user_message(source, now), now))
        elif pending.input_message is not None:
            message = session.append(dict(pending.input_message), now)
            if not m.hidden(message):
                fanout.session_message(session, message, run.run_id)
        elif pending.user_text is not None:
            message = session.append(m.user_message(run.run_id, pending.user_text, now, pending.provenance), now)
            fanout.session_message(session, message, run.run_id)
        elif run.origin not in ("chat.send", "recovery"):
            session.append(m.inbound_user_message(run.origin, now), now)
        for phase in ("preparing_workspace", "preparing_context"):
            fanout.chat(run, "status", drop_if_slow=True, phase=phase)
            fanout.agent(run, "run_status", {"phase": phase})
        fanout.agent(run, "lifecycle", {"phase": "start", "startedAt": now}, session_id=session.session_id)
        if not run.heartbeat:
            # A heartbeat run is not the chat-send / agent-turn service's (which says ``agent.run.started``), and
            # is not shown to control UIs, so no ``model`` push (``server-chat-*.mjs:1057``): start and end only.
            fanout.sessions_changed(session, reason="agent.run.started")
        fanout.sessions_changed(session, phase="start", run_id=run.run_id)
        fanout.agent(
            run,
            "lifecycle",
            {"phase": "model", "provider": m.PROVIDER, "model": m.MODEL},
            session_id=session.session_id,
        )
        if not run.heartbeat:
            fanout.sessions_changed(session, phase="model", run_id=run.run_id)
        self.observe(run, "begin", None)
        if pending.steps is not None:
            self._nursery.start_soon(self._play, run, list(pending.steps))
        self._poke()

    async def _play(self, run: m.Run, steps: list[Step]) -> None:
        todo = collections.deque(steps)
        told = ""  # the text of the last tool result: what a ``Then`` step reads
        with trio.CancelScope() as scope:
            self.plays[run.run_id] = scope
            try:
                while todo:
                    step = todo.popleft()
                    await trio.lowlevel.checkpoint()
                    if run.state != "active":
                        return
                    if isinstance(step, Text):
                        self.text(run, step)
                    elif isinstance(step, Tool):
                        call_id = self.tool_start(run, step.name, step.args, step.call_id)
                        await trio.lowlevel.checkpoint()
                        if step.seconds > 0:
                            await trio.sleep(step.seconds)
                        if step.hold:
                            await self._hold(run)
                        if run.state != "active":
                            return
                        self.tool_result(run, call_id, step.result, step.is_error)
                        told = step.result if isinstance(step.result, str) else str(step.result)
                    elif isinstance(step, Ask):
                        asked = self.ask(run, step)
                        if asked.question is not None:
                            await asked.question.done.wait()
                        if run.state != "active":
                            return
                        told = (asked.question.result if asked.question is not None else asked.error) or ""
                    elif isinstance(step, Then):
                        todo.extendleft(reversed(list(step.build(told))))
                    elif isinstance(step, Media):
                        self.media(run, step)
                    elif isinstance(step, Delay):
                        await trio.sleep(step.seconds)
                    elif isinstance(step, Spawn):
                        spawned = self.spawner(run, step)
                        told = spawned.result_text
                    elif isinstance(step, Hold):
                        await self._hold(run)
                    elif isinstance(step, End):
                        self.end(run, step)
                        return
            finally:
                self.plays.pop(run.run_id, None)

    async def _hold(self, run: m.Run) -> None:
        hold = self._holds.setdefault(run.run_id, trio.Event())
        await hold.wait()
        self._holds.pop(run.run_id, None)  # one release per hold: a later Hold waits again

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in the simulator's nursery (a boot's delayed recoveries)."""
        self._nursery.start_soon(fn, *args)

    def release(self, run: m.Run) -> None:
        self._holds.setdefault(run.run_id, trio.Event()).set()

    def _active(self, run: m.Run) -> m.AgentSession:
        if run.state != "active" or self.sessions[run.key].active is not run:
            raise RuntimeError(f"run {run.run_id} is not active")
        return self.sessions[run.key]

    def text(self, run: m.Run, step: Text) -> None:
        self._active(run)
        for delta in step.deltas():
            if not (run.parts and run.parts[-1].get("type") == "text"):
                # A new assistant item. The Gateway's run-wide chat buffer joins items with a blank line
                # (mergeAssistantText's boundary newlines), and the first delta carries that separator.
                run.segment += 1
                run.parts.append({"type": "text", "text": ""})
                if run.text and not run.text.endswith("\n\n"):
                    sep = "\n" if run.text.endswith("\n") else "\n\n"
                    run.text += sep
                    chat_delta = sep + delta
                else:
                    chat_delta = delta
            else:
                chat_delta = delta
            run.text += delta
            run.parts[-1]["text"] += delta
            now = self._now_ms()
            self._fanout.agent(
                run,
                "assistant",
                {"text": run.parts[-1]["text"], "delta": delta, "itemId": f"{run.run_id}:{run.segment}"},
            )
            self._fanout.chat(
                run, "delta", drop_if_slow=True, deltaText=chat_delta, message=m.text_message(run.text, now)
            )

    def media(self, run: m.Run, step: Media) -> None:
        """A standalone ``MEDIA:`` line: never in the chat text (the Gateway strips it); the ``assistant`` stream
        says ``mediaUrls`` (every name the answer gave so far, the raw references) with an empty delta (measured:
        ``{text, delta:"", mediaUrls, itemId}``). The file is delivered after the run's final."""
        self._active(run)
        run.media.append(step)
        said = run.parts[-1].get("text", "") if run.parts and run.parts[-1].get("type") == "text" else ""
        data = {"text": said, "delta": "", "mediaUrls": [s.name for s in run.media]}
        data["itemId"] = f"{run.run_id}:{run.segment}"
        self._fanout.agent(run, "assistant", data)

    async def _deliver(self, session: m.AgentSession, run: m.Run, files: list[Media]) -> None:
        """The Gateway's rewrite after a run's final: its last assistant transcript message keeps its text (an empty
        one dropped) and gets one block per file, the delivered files are kept in the managed media, and
        ``sessions.changed phase:"message"`` says so (the rewrite's push names no message: measured)."""
        if self.media_delay > 0:
            await trio.sleep(self.media_delay)
        else:
            await trio.lowlevel.checkpoint()
        target = next(
            (
                msg
                for msg in reversed(session.transcript)
                if msg.get("role") == "assistant"
                and run.run_id
                in (
                    (msg.get("__openclaw") or {}).get("runId"),
                    str((msg.get("__openclaw") or {}).get("idempotencyKey") or "").removeprefix("cli-assistant:"),
                )
            ),
            None,
        )
        if target is None:
            return
        blocks: list[dict[str, Any]] = []
        for step in files:
            if step.refused is not None:
                blocks.append(refused_block(step.name, step.mime, step.refused))
            else:
                blocks.append(self.media_store.add(session.key, run.run_id, step.name, step.mime, step.data).block())
        content = target.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
        kept = [p for p in parts if not (p.get("type") == "text" and not str(p.get("text") or "").strip())]
        target["content"] = [*kept, *blocks]
        now = self._now_ms()
        session.updated_at = now
        payload = m.sessions_changed_payload(session, now, message=target)
        payload.pop("messageId", None)
        payload.pop("messageSeq", None)
        self._fanout.emit("sessions.changed", payload, audience=subscribers, drop_if_slow=True)
        self._poke()

    def tool_start(
        self, run: m.Run, name: str, args: Any, call_id: str | None, *, item: Mapping[str, Any] | None = None
    ) -> str:
        """Start a tool call; ``item``: the tool's own ``item`` fields (``_tool_item``)."""
        session = self._active(run)
        call_id = call_id or f"call_{uuid.uuid4().hex[:12]}"
        said = "".join(p["text"] for p in run.parts if p.get("type") == "text")
        if said:
            # Text a model turn says before its tool call is a preamble: the real Gateway also shows it as an
            # ``item`` (kind "preamble", update then end) before the tool's item (measured on 2026.9.6).
            preamble = {"kind": "preamble", "title": "Preamble", "progressText": said}
            preamble["itemId"] = f"commentary-{run.segment - 1}-{uuid.uuid4().hex[:24]}"
            self._fanout.agent(run, "item", {**preamble, "phase": "update"})
            self._fanout.agent(run, "item", {**preamble, "phase": "end"})
        run.parts.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
        run.open_tools[call_id] = name
        # The model turn that asked for the tool is persisted (and pushed as session.message) before the
        # tool runs; its result is persisted without a session.message (live probe, NOTES.md).
        self._flush(session, run, "toolUse")
        now = self._now_ms()
        fields = dict(item or {})
        self._items[(run.run_id, call_id)] = fields
        self._fanout.agent(run, "item", _tool_item(call_id, name, "start", "running", fields, startedAt=now))
        self._tool_event(run, session, {"phase": "start", "name": name, "toolCallId": call_id, "args": args})
        self.observe(run, "tool_start", name)
        return call_id

    def _tool_event(self, run: m.Run, session: m.AgentSession, data: dict[str, Any]) -> None:
        """``Fanout.tool_event``, told the session only for a sub-agent's (its frames carry the child's row), so the
        two-argument call stays what tests wrap."""
        if session.spawn is not None:
            self._fanout.tool_event(run, data, session)
        else:
            self._fanout.tool_event(run, data)

    def tool_result(
        self,
        run: m.Run,
        call_id: str,
        result: Any,
        is_error: bool,
        *,
        details: Mapping[str, Any] | None = None,
        status: str | None = None,
        error: str | None = None,
    ) -> None:
        """A tool call's result: stored, then its ``tool`` event (``details``: the tool's, ``{}`` by default) and the
        item's end (``status``: ``done``, or ``blocked`` for an error, unless the tool has its own; ``error``)."""
        session = self._active(run)
        name = run.open_tools.pop(call_id, None)
        if name is None:
            raise ValueError(f"tool call {call_id} was not started on run {run.run_id}")
        now = self._now_ms()
        session.append(m.tool_result_message(run, call_id, name, result, is_error, now), now)
        content = {
            "content": [{"type": "text", "text": result if isinstance(result, str) else str(result)}],
            "details": dict(details or {}),
        }
        self._tool_event(
            run,
            session,
            {"phase": "result", "name": name, "toolCallId": call_id, "isError": is_error, "result": content},
        )
        fields = self._items.pop((run.run_id, call_id), {})
        if error is not None:
            fields = {**fields, "error": error}
        status = status or ("blocked" if is_error else "done")
        self._fanout.agent(run, "item", _tool_item(call_id, name, "end", status, fields, endedAt=now))
        self.observe(run, "tool_result", name)

    # ------------------------------------------------------------------ ask_user

    def ask(self, run: m.Run, step: Ask) -> Asked:
        """The model calls ``ask_user`` (offered directly): the call is stored and started as any tool's (its item
        titled ``Ask User <first question>``); then the tool checks the arguments (a refusal is its error result,
        and no question, section 2) and raises the question (``question.requested``, right after the tool start).
        The run then waits: ``settled`` gives it the result when the question ends."""
        args = q.ask_arguments(step.questions, step.timeout_s)
        call_id = self.tool_start(run, q.TOOL, args, step.call_id, item=q.item_fields(args))
        error = q.invalid_arguments(args)
        if error is None and self.questions.pending_in_session(run.key) is not None:
            error = q.ALREADY_PENDING
        if error is not None:
            details = {"status": "error", "error": error}
            self.tool_result(run, call_id, error, True, details=details, status="blocked", error=error)
            return Asked(call_id, None, error)
        return Asked(call_id, self.questions.raise_question(run, call_id, args, step.timeout_s))

    def _question_settled(self, question: SimQuestion) -> bool:
        """A question ended: its run, still waiting in that tool call, gets the tool's result (measured: the item
        ends ``completed``) and goes on. False when the run is gone (aborted, cut) and there is no one to tell."""
        run = self.runs.get(question.run_id)
        if run is None or run.state != "active" or question.call_id not in run.open_tools:
            return False
        assert question.result is not None
        self.tool_result(run, question.call_id, question.result, False, details=question.details, status="completed")
        return True

    def _ask_aborted(self, run: m.Run, question: SimQuestion) -> None:
        """An aborted run's ``ask_user`` call ends ``Aborted`` (``isError``; direct mode's ``details`` are ``{}``)
        and its item ``failed``; the transcript keeps the call without a result (section 8, measured)."""
        name = run.open_tools.pop(question.call_id, q.TOOL)
        content = {"content": [{"type": "text", "text": q.ABORTED_TEXT}], "details": {}}
        data = {"phase": "result", "name": name, "toolCallId": question.call_id, "isError": True, "result": content}
        self._fanout.tool_event(run, data)
        fields = {**self._items.pop((run.run_id, question.call_id), {}), "error": q.ABORTED_TEXT}
        item = _tool_item(question.call_id, name, "end", "failed", fields, endedAt=self._now_ms())
        self._fanout.agent(run, "item", item)

    def answer_by_send(
        self, key: str, run_id: str, text: str, question: SimQuestion, answers: Mapping[str, Sequence[str]]
    ) -> None:
        """A ``chat.send`` on a session whose run waits on ``question`` is its answer, not a new turn (section 9,
        measured): the user's text is stored (between the tool call and its result) and pushed, the question is
        answered ``resolvedBy: "plain-text"`` (the asking run goes on with it), and the send's run id gets only a
        bare ``chat`` final: no message, no ``agent`` event, no run."""
        session = self.session(key)
        now = self._now_ms()
        message = session.append(m.user_message(run_id, text, now), now)
        session.updated_at = now
        self._fanout.session_message(session, message, run_id)
        self.questions.answered_sends[run_id] = question.id
        if question.status == q.PENDING:
            self.questions.settle(question, q.ANSWERED, answers, q.PLAIN_TEXT)
        bare = {"runId": run_id, "sessionKey": key, "seq": 1, "state": "final"}
        self._fanout.emit("chat", bare, audience=everyone, drop_if_slow=False)
        self._poke()

    def steer(self, run: m.Run, text: str, provenance: dict[str, Any] | None) -> None:
        """The model turn in progress completes, then the steered input joins the transcript as a user turn
        that starts no run (modelled, not measured: the real dispatch is subagent-announce-delivery's
        ``path: "steered"``); what the run says next is a new assistant item of the same run."""
        session = self._active(run)
        self._flush(session, run, "stop")
        now = self._now_ms()
        message: dict[str, Any] = {"role": "user", "content": text, "timestamp": now, "__openclaw": {}}
        if provenance is not None:
            message["provenance"] = dict(provenance)
        self._push(session, run, session.append(message, now))

    def _push(self, session: m.AgentSession, run: m.Run, message: dict[str, Any]) -> None:
        """Tell clients of a message the run stored: ``session.message``, unless it is a heartbeat run's bare
        acknowledgement, which the Gateway's display projection hides (``projectSessionMessagePayload``,
        ``session-transcript-message-*.mjs:40-49``; measured). Ordinary runs' silent replies are left as they
        were (read in the same code, not measured)."""
        if run.heartbeat and m.hidden(message):
            self._fanout.hidden_message(session, message)
        else:
            self._fanout.session_message(session, message, run.run_id)

    def _flush(self, session: m.AgentSession, run: m.Run, stop_reason: str) -> None:
        """Persist the assistant message being built, as the Gateway does when a model turn completes."""
        if not run.parts:
            return
        now = self._now_ms()
        message = session.append(m.assistant_message(run, run.parts, now, stop_reason), now)
        run.parts = []
        self._push(session, run, message)

    @staticmethod
    def _committed(session: m.AgentSession, run: m.Run) -> bool:
        """The Gateway declines an aborted partial that the transcript's last assistant message already holds
        (same run, same text: ``shouldAppendInTransaction`` in its dist)."""
        last = next((msg for msg in reversed(session.transcript) if msg.get("role") == "assistant"), None)
        meta = (last or {}).get("__openclaw") or {}
        if last is None or run.run_id not in (
            meta.get("runId"),
            str(meta.get("idempotencyKey") or "").removeprefix("cli-assistant:"),
        ):
            return False
        said = "".join(p.get("text", "") for p in last.get("content") or [] if p.get("type") == "text")
        return said.strip() == run.text.strip()

    def end(self, run: m.Run, step: End) -> None:
        """End the active run with its terminal, settle the row, then begin the next queued run."""
        fanout = self._fanout
        session = self._active(run)
        now = self._now_ms()
        state = step.state
        sid = session.session_id
        asking = self.questions.pending_of_run(run.run_id)
        if state == "final":
            last = session.transcript[-1] if session.transcript else None
            if not run.parts and (run.media or (last is not None and last.get("role") == "toolResult")):
                # The agent loop ends on an assistant message without tool calls, stored with stopReason "stop"
                # even when it says nothing (a run whose last action was a tool call still ends on one).
                run.parts = [{"type": "text", "text": ""}]
            self._flush(session, run, "stop")
            fanout.agent(
                run, "lifecycle", {"phase": "finishing", "stopReason": "stop", "aborted": False}, session_id=sid
            )
            fanout.agent(
                run,
                "lifecycle",
                {"phase": "end", "stopReason": "stop", "aborted": False, "endedAt": now},
                session_id=sid,
            )
            message = m.text_message(run.text, now) if run.text else None
            if run.heartbeat and message is not None and m.is_ack(message):
                # A heartbeat's final without its acknowledgement (``normalizeHeartbeatChatFinalText``,
                # ``server-chat-*.mjs:60-75``): measured, a bare HEARTBEAT_OK's final has no ``message``.
                message = None
            yielded = True if step.yielded else None
            fanout.chat(
                run,
                "final",
                drop_if_slow=False,
                stopReason=step.stop_reason or "stop",
                yielded=yielded,
                message=message,
            )
            if run.heartbeat:
                # The runner's global event comes after the final and before the end push (measured).
                started = session.started_at if session.started_at is not None else now
                fanout.heartbeat(m.heartbeat_event(run.text, now, now - started))
            session.status, session.last_run_error = "done", None
            if run.media:
                self._nursery.start_soon(self._deliver, session, run, list(run.media))
        elif state == "aborted":
            stop_reason = step.stop_reason or "rpc"
            run.parts = []
            if run.text.strip() and stop_reason != "restart" and not self._committed(session, run):
                # (A stop past its drain keeps no partial: measured on 2026.9.6, every mid-reply cut loses it.)
                # The partial is the run-wide chat buffer, every item said so far joined by blank lines, not
                # just the item being written (measured on 2026.9.6: "Hello\n\nHello from" after a tool).
                partial = session.append(m.aborted_partial(run, run.text, now, stop_reason), now)
                self._push(session, run, partial)
            fanout.agent(
                run,
                "lifecycle",
                {"phase": "end", "stopReason": stop_reason, "aborted": True, "endedAt": now},
                session_id=sid,
            )
            message = m.text_message(run.text, now) if run.text else None
            fanout.chat(run, "aborted", drop_if_slow=False, stopReason=stop_reason, message=message)
            if asking is not None:
                self._ask_aborted(run, asking)
            fanout.agent(run, "lifecycle", {"phase": "error", "error": "aborted", "aborted": True}, session_id=sid)
            # A cancel for a restart keeps the row running so the Gateway recovers it at boot (F2).
            session.status = "running" if stop_reason == "restart" else "killed"
            session.aborted_last_run = True
        elif state == "error":
            error = step.error or "run failed"
            if run.cli_runtime:
                # A CLI runtime commits nothing of a failed turn: the transcript gets a custom note, and the
                # send's own path says the error a second time (measured on 2026.9.6, tests/test_realgw_cuts.py).
                run.parts = []
                session.append(m.failed_before_reply(run, error, now), now)
            else:
                # The failed model turn's tool calls stay an ordinary message; its text goes into the Gateway's
                # terminal error record, after the failure's copy (``assistant-error-transcript``; measured).
                texts = [p for p in run.parts if p.get("type") == "text"]
                run.parts = [p for p in run.parts if p.get("type") != "text"]
                self._flush(session, run, "toolUse")
                said = "".join(str(p.get("text") or "") for p in texts)
                self._push(session, run, session.append(m.terminal_error_message(run, error, said, now), now))
            fanout.agent(run, "lifecycle", {"phase": "error", "error": error}, session_id=sid)
            fanout.chat(run, "error", drop_if_slow=False, errorMessage=error, stopReason=step.stop_reason)
            # The send's own path says the error a second time (measured on 2026.9.6, a CLI and an embedded turn).
            fanout.chat(run, "error", drop_if_slow=False, errorMessage=m.failed_before_reply_text(error))
            session.status, session.last_run_error = "failed", error
            run.error = error
        else:
            raise ValueError(f"unknown end state {state!r}")
        if state != "aborted":
            session.aborted_last_run = False
        if not run.heartbeat:
            # A turn's usage replaces what a compaction left in the row (measured); the simulator reports none.
            session.total_tokens = session.tokens_fresh = None
        run.state = "ended"
        run.terminal = state
        run.open_tools.clear()
        self._forget_items(run)
        self.observe(run, "end", None)
        session.active = None
        session.last_run_id = run.run_id
        session.ended_at = session.updated_at = now
        self.release(run)
        if not run.heartbeat:  # said by the chat-send / agent-turn service only, as ``agent.run.started``
            fanout.sessions_changed(session, reason="agent.input.settled")
        fanout.sessions_changed(session, phase="end", run_id=run.run_id)
        if state != "final":
            fanout.sessions_changed(session, phase="error", run_id=run.run_id)
        self.questions.run_ended(run.run_id)
        if asking is not None:
            # A run that ends while it asks cancels its question (section 8: "An aborted agent run cancels its
            # pending Gateway question", measured for chat.abort; modelled alike for any other end).
            self.questions.settle(asking, q.CANCELLED, resolved_by=q.REQUESTER_INACTIVE)
        if session.queued:
            self._begin(session, session.queued.pop(0))
        self._poke()

    def _forget_items(self, run: m.Run) -> None:
        for key in [k for k in self._items if k[0] == run.run_id]:
            del self._items[key]

    def interrupt_for_restart(self, run: m.Run) -> None:
        """A restart cuts the run (measured on 2026.9.6, a forced restart or one past its 300 s wait): no chat
        terminal and no lifecycle end reach clients; the transcript gets an empty aborted assistant message of the
        run ("agent run aborted for restart": the partial is lost); the row stays ``running`` with
        ``abortedLastRun`` for the boot's recovery, said in a settled push (seen once in three cuts)."""
        session = self.sessions[run.key]
        now = self._now_ms()
        run.parts = []
        message = m.assistant_message(run, [{"type": "text", "text": ""}], now, "aborted")
        message["errorMessage"] = "agent run aborted for restart"
        self._push(session, run, session.append(message, now))
        run.state = "ended"
        run.open_tools.clear()
        self._forget_items(run)
        session.active = None
        session.status, session.aborted_last_run = "running", True
        session.updated_at = now
        self.release(run)
        self._fanout.sessions_changed(session, reason="agent.input.settled")

    def cut(self, run: m.Run) -> None:
        """The process died under the run: it ends without a terminal and nothing of it is persisted."""
        run.state = "ended"
        self.sessions[run.key].active = None
