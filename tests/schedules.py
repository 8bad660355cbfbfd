"""Seeded random fault schedules over the scenario language (``docs/scenarios.md``), and their shrinking.

A schedule is a scenario file: chats, runs that say text, call tools and end every way (hand-driven, or scripted
with ``steps`` so that several queue back to back on one chat), heartbeats, silent sentinels, runs on keys that
are no chat's, ``chat.send`` runs, dropped events, slow consumers, cut sockets, failing transcript reads, the four
Gateway restart modes, and two owc processes ("deploys") killed and started. ``Model`` plays each op on a model of
the simulator and of owc's deploys, so a schedule only ever drives a run the simulator is running and never
waits on something that cannot come; and it knows what each schedule must produce: which runs must show (one
finished message), which must not, which may (a crash cut what they showed live), and per chat the order the
runs started in.

Shrinking (``shrink``) is delta debugging over the body's ops: every candidate is repaired by the same model
(an op that is no longer valid is dropped; a missing ``wait`` or ``await_clients`` is put back; the tail that
ends every run and waits is rebuilt), so each candidate is a valid schedule, and the smallest one that still
fails is kept. Pure: no I/O, no owc import; ``bench/fuzz_schedules.py`` and ``tests/test_fuzz_seeds.py`` play
them.

Ops the generator will use once the scenario language has them (issue 11): ``owui_message`` (a user turn or a
``done:false`` stub, branches, ``currentId``), ``expect`` (so a shrunk file carries its own expected outcome),
``process`` on ``connect``, a ``send`` owned by a named deploy, recovery runs with named ids and holds, and
``chat.history`` stalling.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

CHATS = ("a", "b", "c")
KEYS = {"main": "agent:main:main", "sub": "agent:main:subagent:fuzz"}
DEPLOYS = ("owc", "owc2")
TEXTS = (
    "Hello there.",
    "Working on it.",
    "Done.",
    "All checks passed.",
    "Two lines:\nthe second one.",
    "Numbers 1, 2 and 3.",
)
SENTINELS = ("NO_REPLY", "ANNOUNCE_SKIP")
#: Short answers that are only the start of a sentinel: held back while the run streams, shown at its end.
SENTINEL_PREFIXES = ("NO", "ANNOUNCE")
SILENT = frozenset(SENTINELS) | {"HEARTBEAT_OK"}
#: What the simulator's fake model answers a ``send`` with (``owc/sim/script.py``).
CANNED = "Hello from the fake model. This is a canned answer."
RESTART_MODES = ("restart", "stop", "container", "crash")

#: Fates of a run.
SHOW, SILENT_FATE, MAY = "show", "silent", "may"


@dataclass
class RunModel:
    name: str
    session: str  # a chat name or a key name
    on_chat: bool
    heartbeat: bool
    scripted: bool
    items: list[str] = field(default_factory=list)  # text items (consecutive texts join into one)
    tools: int = 0
    state: str = "queued"  # queued | active | ended | cancelled
    fate: str | None = None

    open_text: bool = False  # the last thing it said was text: the next text joins that item
    said_after_tool: bool = False  # it said text after its last tool call (the streamed tail a cut loses)
    pipe: bool = False  # the Pipe's own run for an Open WebUI placeholder (``reply_to``): its place is fixed
    aborted: bool = False  # it ends (or may end) with an aborted terminal
    cut: bool = False  # a Gateway crash cut it (no terminal)
    errored: bool = False  # it ends with an error of its own: it shows that error, also with nothing said

    @property
    def shows(self) -> bool:
        """It has something to show once ended: text or a card (a run that failed saying nothing has no message,
        live or not: its error has no message to show in)."""
        return self.visible

    @property
    def repeats_an_item(self) -> bool:
        """A text item that starts with an earlier item's text (the aborted-buffer case of issue 11)."""
        return any(b.startswith(a) for i, a in enumerate(self.items) for b in self.items[i + 1 :])

    def say(self, text: str) -> None:
        self.said_after_tool = self.tools > 0
        if self.open_text:
            self.items[-1] += text
        else:
            self.items.append(text)
        self.open_text = True

    def tool(self) -> None:
        self.tools += 1
        self.open_text = False
        self.said_after_tool = False

    @property
    def visible(self) -> bool:
        return self.tools > 0 or any(i.strip() and i.strip() not in SILENT for i in self.items)

    def settle(self, how: str) -> None:
        """``how``: ``end`` (a terminal), ``crash`` (cut with no terminal), ``cancel`` (never began),
        ``unknown`` (a scripted run a restart may or may not have caught)."""
        self.state = "cancelled" if how == "cancel" else "ended"
        self.cut = how == "crash"
        # A heartbeat runner's turn is any run's here: the Gateway's own chat shows its reply (a bare
        # ``HEARTBEAT_OK`` is a sentinel, so ``shows`` is false for it): issue 24 item 6.
        if not self.on_chat or how == "cancel":
            self.fate = SILENT_FATE
        elif how == "unknown":
            self.fate = MAY if self.shows else SILENT_FATE
        elif how == "crash":
            # What it called a tool for is persisted with the tool call; text after it dies with the process.
            self.fate = SHOW if self.tools else (MAY if self.visible else SILENT_FATE)
        else:
            self.fate = SHOW if self.shows else SILENT_FATE


@dataclass
class Schedule:
    seed: int | None
    ops: list[dict[str, Any]]
    body: list[dict[str, Any]]  # the ops shrinking works on (no header, no tail)
    expect: dict[str, str]  # run name -> show / silent / may
    order: dict[str, list[str]]  # chat name -> its runs in start order
    features: frozenset[str]
    heartbeats: frozenset[str] = frozenset()  # names of heartbeat runs
    aborted_repeats: frozenset[str] = frozenset()  # aborted runs with an item that starts with an earlier one
    prefixes: frozenset[str] = frozenset()  # runs with an item that is only the start of a sentinel ("NO")
    cut: frozenset[str] = frozenset()  # runs a Gateway crash cut (no terminal)
    pipes: frozenset[str] = frozenset()  # the Pipe's runs of Open WebUI placeholders (``reply_to``)

    def text(self) -> str:
        head = f"# fuzz schedule, seed {self.seed}\n" if self.seed is not None else "# fuzz schedule, shrunk\n"
        return head + "".join(json.dumps(op) + "\n" for op in self.ops)


class Model:
    """The simulator and owc's deploys as far as a schedule can know them; ``apply`` says whether an op is valid
    in the state reached so far and, if so, plays it."""

    def __init__(self) -> None:
        self.chats: set[str] = set()
        self.keys: set[str] = set()
        self.queues: dict[str, list[RunModel]] = {}
        self.runs: dict[str, RunModel] = {}
        self.started: list[RunModel] = []
        self.live: list[str] = []
        self.known: set[str] = set()
        #: Sessions where a scripted run (or a restart's recovery) may be running: no hand-driven run starts
        #: there until a ``wait`` (it could not know when it begins).
        self.locked: set[str] = set()
        self.unknown_scripted: set[str] = set()  # scripted runs a restart may have caught (until a wait)
        self.stable = False  # every live deploy is known to be connected
        self.failing = False  # chat.history is failing on some connection
        self.slowed = False  # a slow connection may close at any later event: no named target until a restart
        self.features: set[str] = set()
        self.quiet = False  # the last op was a wait: everything has settled
        # Issue 24's shapes, as the model sees them (so a shrunk schedule still names its features).
        self.placeholders: dict[str, str] = {}  # Open WebUI placeholders no run replies to yet -> their chat
        self.owui_names: set[str] = set()
        self.assistants: dict[str, str] = {}  # Open WebUI's assistant messages -> their chat (a teardown saves one)
        self.dropping = False  # a drop was asked since the last wait: the next droppable events may be lost
        self.recovering: set[str] = set()  # sessions whose cut run a delayed boot recovery is still to continue
        self.beat_silent: dict[str, bool] = {}  # session -> its last run was a heartbeat that showed nothing

    # -------------------------------------------------------------- queries

    def active(self, *, driven: bool = True) -> list[RunModel]:
        return [
            q[0] for q in self.queues.values() if q and q[0].state == "active" and (not driven or not q[0].scripted)
        ]

    def driven_pending(self) -> bool:
        return any(not r.scripted for q in self.queues.values() for r in q)

    def can_wait(self) -> bool:
        return not self.driven_pending() and not self.failing

    def sessions(self) -> list[str]:
        return sorted(self.chats) + sorted(self.keys)

    # -------------------------------------------------------------- playing

    def apply(self, op: dict[str, Any]) -> bool:
        name = op["op"]
        handler: Callable[[dict[str, Any]], bool] = getattr(self, f"_op_{name}")
        ok = handler(op)
        if ok:
            self.quiet = name == "wait"
        return ok

    def _op_chat(self, op: dict[str, Any]) -> bool:
        self.chats.add(op["chat"])
        self.queues.setdefault(op["chat"], [])
        return True

    def _op_key(self, op: dict[str, Any]) -> bool:
        self.keys.add(op["name"])
        self.queues.setdefault(op["name"], [])
        return True

    def _deploy_ok(self, op: dict[str, Any]) -> bool:
        deploy = op.get("deploy")
        return deploy is None or (deploy in self.live and self.stable and not self.slowed)

    def _op_connect(self, op: dict[str, Any]) -> bool:
        if op["deploy"] in self.known:
            return False
        self.known.add(op["deploy"])
        return self._op_start(op)

    def _op_start(self, op: dict[str, Any]) -> bool:
        if op["deploy"] in self.live:
            return False
        self.known.add(op["deploy"])
        self.live.append(op["deploy"])
        if len(self.live) > 1:
            self.features.add("deploys")
        return True  # start returns once the deploy is subscribed; the others are as stable as before

    def _op_kill(self, op: dict[str, Any]) -> bool:
        if op["deploy"] not in self.live:
            return False
        self.live.remove(op["deploy"])
        self.features.add("kill")
        return True

    def _op_run(self, op: dict[str, Any]) -> bool:
        session = op.get("chat") or op.get("key")
        if session not in self.queues or op["run"] in self.runs:
            return False
        scripted = op.get("steps") is not None
        if not scripted and session in self.locked:
            return False
        reply_to = op.get("reply_to")
        if reply_to is not None and (self.placeholders.get(reply_to) != session or op.get("heartbeat")):
            return False
        run = RunModel(op["run"], session, session in self.chats, bool(op.get("heartbeat")), scripted)
        if reply_to is not None:
            del self.placeholders[reply_to]
            run.pipe = True
        if session in self.recovering:
            self.features.add("newer-during-restart")  # a newer run on the key before the boot's recovery began
        if run.heartbeat and self.beat_silent.get(session):
            self.features.add("heartbeat-after-silent")
        if run.heartbeat:
            self.features.add("heartbeat")
        if not run.on_chat:
            self.features.add("other-key")
        self.runs[run.name] = run
        queue = self.queues[session]
        if queue:
            self.features.add("queued")
        queue.append(run)
        self.started.append(run)
        if scripted:
            self.locked.add(session)
            self.unknown_scripted.add(run.name)
            for step in op["steps"]:
                if "text" in step:
                    run.say(step["text"])
                elif "tool" in step:
                    run.tool()
                elif "end" in step:
                    end = step["end"]
                    state = end.get("state") if isinstance(end, dict) else end
                    run.aborted, run.errored = state == "aborted", state == "error"
            self._note_texts(run)
        if len(queue) == 1:
            self._begin(session)
        return True

    def _op_send(self, op: dict[str, Any]) -> bool:
        session = op.get("chat")
        if session not in self.chats or session in self.locked or self.queues[session] or op["run"] in self.runs:
            return False
        run = RunModel(op["run"], session, True, False, True)
        if "USE_TOOL" in op["message"]:
            run.tool()
        run.say(CANNED)
        self.runs[run.name] = run
        self.queues[session].append(run)
        self.started.append(run)
        self.locked.add(session)
        self.unknown_scripted.add(run.name)
        self.features.add("send")
        self._begin(session)
        return True

    def _begin(self, session: str) -> None:
        queue = self.queues[session]
        if queue:
            queue[0].state = "active"

    def _driven_active(self, op: dict[str, Any]) -> RunModel | None:
        run = self.runs.get(op["run"])
        if run is None or run.scripted or run.state != "active":
            return None
        return run

    def _note_texts(self, run: RunModel) -> None:
        for item in run.items:
            if item.strip() in SENTINELS:
                self.features.add("sentinel")
            if item.strip() in SENTINEL_PREFIXES:
                self.features.add("sentinel-prefix")

    def _op_text(self, op: dict[str, Any]) -> bool:
        run = self._driven_active(op)
        if run is None:
            return False
        run.say(op["text"])
        self._note_texts(run)
        return True

    def _op_tool(self, op: dict[str, Any]) -> bool:
        run = self._driven_active(op)
        if run is None:
            return False
        run.tool()
        return True

    def _op_end(self, op: dict[str, Any]) -> bool:
        run = self._driven_active(op)
        if run is None:
            return False
        run.aborted, run.errored = op.get("state") == "aborted", op.get("state") == "error"
        if op.get("state") == "error" and run.on_chat:
            if not self.live or not self.stable:
                self.features.add("error-away")  # the error terminal while owc is away or reconnecting
            elif self.dropping:
                self.features.add("error-drop")  # its events may fall in a seq gap
        self._end(run, "end")
        return True

    def _end(self, run: RunModel, how: str) -> None:
        queue = self.queues[run.session]
        self.beat_silent[run.session] = run.heartbeat and not run.visible
        run.settle(how)
        queue.remove(run)
        self._begin(run.session)

    def _op_drop(self, op: dict[str, Any]) -> bool:
        if not self._deploy_ok(op):
            return False
        self.features.add("drop")
        self.dropping = True
        return True

    def _op_disconnect(self, op: dict[str, Any]) -> bool:
        if not self._deploy_ok(op):
            return False
        self.stable = False
        self.features.add("away")
        return True

    def _op_slow(self, op: dict[str, Any]) -> bool:
        if not self._deploy_ok(op):
            return False
        self.stable = False
        self.slowed = True
        self.features.add("slow")
        return True

    def _op_fail(self, op: dict[str, Any]) -> bool:
        if op.get("deploy") is not None:
            return False  # untargeted only: a named connection may be between reconnects
        self.failing = True
        self.features.add("history-fails")
        return True

    def _op_heal(self, op: dict[str, Any]) -> bool:
        if op.get("deploy") is not None or not self.failing:
            return False
        self.failing = False
        return True

    def _op_sleep(self, op: dict[str, Any]) -> bool:
        return True

    def _op_await_clients(self, op: dict[str, Any]) -> bool:
        if int(op.get("count", 1)) != len(self.live) or not self.live:
            return False
        self.stable = True
        return True

    def _op_restart(self, op: dict[str, Any]) -> bool:
        mode = op["mode"]
        if mode in ("restart", "stop") and any(len(q) > 1 for q in self.queues.values()):
            # The simulator ends the active run with a terminal, which begins the next queued run, and that one
            # survives the restart (a driven one then stays active for ever): not what a Gateway does, so no
            # schedule asks for it (reported, issue 11).
            return False
        self.features.add(f"restart-{mode}")
        for session, queue in self.queues.items():
            driven_head = bool(queue) and not queue[0].scripted
            for run in list(queue):
                queue.remove(run)
                if run.state == "active" and not run.scripted:
                    if run.said_after_tool and mode in ("stop", "crash", "restart"):
                        self.features.add("cut-after-tool")  # its streamed tail after a tool call is lost
                    if op.get("recovery_delay") and mode != "container" and run.on_chat:
                        self.recovering.add(session)
                    run.aborted = mode in ("restart", "stop")
                    # A restart or a stop past its drain loses the partial from the transcript as a crash does
                    # (measured on 2026.9.6: only a connected owc keeps what it streamed); a container stop fails
                    # it with an error (its text stays).
                    run.settle("crash" if mode in ("crash", "restart", "stop") else "end")
                elif run.scripted and not driven_head:
                    run.aborted = run.aborted or mode in ("restart", "stop")
                    run.settle("unknown")  # it may have ended, be running, or not have begun
                else:
                    run.settle("cancel")  # queued behind a hand-driven run: it never began
            self.locked.add(session)  # a recovery run may start there at boot
        self.stable = False
        self.slowed = False  # every connection is new
        return True

    def _op_wait(self, op: dict[str, Any]) -> bool:
        if not self.can_wait():
            return False
        for queue in self.queues.values():
            for run in list(queue):
                queue.remove(run)
                run.settle("end")
        self.locked.clear()
        self.unknown_scripted.clear()
        self.dropping = False
        self.recovering.clear()
        return True

    def _op_owui_message(self, op: dict[str, Any]) -> bool:
        if op["chat"] not in self.chats or op["message"] in self.owui_names or op["message"] in self.runs:
            return False
        self.owui_names.add(op["message"])
        if op.get("role") == "assistant":
            self.assistants[op["message"]] = op["chat"]
            if not op.get("done"):
                self.placeholders[op["message"]] = op["chat"]
        return True

    def _op_wait_claimed(self, op: dict[str, Any]) -> bool:
        run = self.runs.get(op["run"])
        return (
            run is not None
            and run.on_chat
            and not run.heartbeat
            and run.state == "active"
            and run.visible
            and bool(self.live)
            and not self.slowed
            and not self.failing
        )

    def _op_teardown(self, op: dict[str, Any]) -> bool:
        if op["deploy"] not in self.live or self.assistants.get(op["message"]) != op["chat"]:
            return False
        self.live.remove(op["deploy"])
        self.features |= {"owui-teardown", "kill"}
        return True

    # -------------------------------------------------------------- repair and the tail

    def repair(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        """The op, preceded by what it needs (a ``wait``, an ``await_clients``), or nothing if it cannot be
        made valid here."""
        if self.apply(op):
            return [op]
        before: list[dict[str, Any]] = []
        if op["op"] in ("drop", "disconnect", "slow") and op.get("deploy") in self.live and not self.stable:
            wait = {"op": "await_clients", "count": len(self.live)}
            if self.apply(wait):
                before.append(wait)
        elif op["op"] in ("run", "send") and (op.get("chat") or op.get("key")) in self.locked:
            if self.failing:
                heal = {"op": "heal"}
                self.apply(heal)
                before.append(heal)
            if self.can_wait():
                self.apply({"op": "wait"})
                before.append({"op": "wait"})
        if before and self.apply(op):
            return [*before, op]
        return before

    def tail(self) -> list[dict[str, Any]]:
        """End every hand-driven run (queued ones in turn), heal, have a deploy, wait for everything (nothing if
        the schedule already ends so: a schedule rebuilt from its own file is the same file)."""
        out: list[dict[str, Any]] = []
        if self.quiet and self.live:
            return out
        while True:
            active = self.active()
            if not active:
                break
            for run in active:
                end = {"op": "end", "run": run.name}
                self.apply(end)
                out.append(end)
        if self.failing:
            self.apply({"op": "heal"})
            out.append({"op": "heal"})
        if not self.live:
            start = {"op": "start", "deploy": sorted(self.known)[0]}
            self.apply(start)
            out.append(start)
        if not self.stable:
            clients = {"op": "await_clients", "count": len(self.live)}
            self.apply(clients)
            out.append(clients)
        self.apply({"op": "wait"})
        out.append({"op": "wait"})
        return out


def header() -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = [{"op": "chat", "chat": c, "user": f"u{i}"} for i, c in enumerate(CHATS)]
    ops += [{"op": "key", "name": name, "key": key} for name, key in KEYS.items()]
    ops.append({"op": "connect", "deploy": DEPLOYS[0]})
    return ops


def build(body: Sequence[dict[str, Any]], seed: int | None = None) -> Schedule:
    """The schedule a body makes: the header, the body repaired op by op, the tail; and what it must produce."""
    model = Model()
    ops = []
    for op in header():
        model.apply(op)
        ops.append(op)
    model.stable = True
    kept: list[dict[str, Any]] = []
    for op in body:
        kept += model.repair(dict(op))
    ops += kept
    ops += model.tail()
    expect = {r.name: r.fate or MAY for r in model.runs.values()}
    # The Pipe's runs are left out of the order: their placeholder's place is fixed when the user sends.
    order = {c: [r.name for r in model.started if r.session == c and not r.pipe] for c in sorted(model.chats)}
    heartbeats = frozenset(r.name for r in model.runs.values() if r.heartbeat)
    repeats = frozenset(r.name for r in model.runs.values() if r.aborted and r.repeats_an_item)
    prefixes = frozenset(r.name for r in model.runs.values() if any(i.strip() in SENTINEL_PREFIXES for i in r.items))
    cut = frozenset(r.name for r in model.runs.values() if r.cut)
    pipes = frozenset(r.name for r in model.runs.values() if r.pipe)
    return Schedule(
        seed, ops, kept, expect, order, frozenset(model.features), heartbeats, repeats, prefixes, cut, pipes
    )


# ------------------------------------------------------------------ the generator


class _Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.model = Model()
        for op in header():
            self.model.apply(op)
        self.model.stable = True
        self.body: list[dict[str, Any]] = []
        self.n = 0

    def emit(self, op: dict[str, Any]) -> bool:
        ok = self.model.apply(op)
        if ok:
            self.body.append(op)
        return ok

    def text(self) -> str:
        x = self.r.random()
        if x < 0.12:
            return self.r.choice(SENTINELS)
        if x < 0.14:
            return self.r.choice(SENTINEL_PREFIXES)
        return self.r.choice(TEXTS)

    def new_run(self) -> str:
        self.n += 1
        return f"r{self.n}"

    def steps(self) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = []
        for _ in range(self.r.randint(1, 3)):
            if self.r.random() < 0.3:
                steps.append({"tool": {"name": "exec", "args": {"i": self.n}, "result": "ok"}})
            else:
                steps.append({"text": self.text()})
        steps.append({"end": self.r.choice(["final", "final", "final", "error", "aborted"])})
        if steps[-1]["end"] == "error":
            steps[-1] = {"end": {"state": "error", "error": "boom"}}
        return steps

    def start_run(self) -> None:
        r, m = self.r, self.model
        on_chat = r.random() < 0.9
        session = r.choice(CHATS) if on_chat else r.choice(sorted(KEYS))
        op: dict[str, Any] = {"op": "run", "run": self.new_run(), ("chat" if on_chat else "key"): session}
        op["origin"] = r.choice(["cron", "sessions_send", "subagent_announce"])
        if r.random() < 0.1:
            op["heartbeat"], op["origin"] = True, "heartbeat"
        if r.random() < 0.2:
            op["user_text"] = "Wake up."
        if r.random() < 0.3 or session in m.locked:
            op["steps"] = self.steps()
        self.emit(op)

    def burst(self) -> None:
        """Several runs back to back on one chat: scripted, so each begins when the one before it ends."""
        chat = self.r.choice(CHATS)
        for _ in range(self.r.randint(2, 8)):
            self.emit({"op": "run", "chat": chat, "run": self.new_run(), "origin": "cron", "steps": self.steps()})

    def drive(self, active: list[RunModel]) -> None:
        r = self.r
        run = r.choice(active)
        x = r.random()
        if x < 0.55:
            self.emit({"op": "text", "run": run.name, "text": self.text()})
        elif x < 0.75:
            tool: dict[str, Any] = {"op": "tool", "run": run.name, "name": "exec", "args": {"i": self.n}}
            tool["result"] = "ok"
            if r.random() < 0.1:
                tool["error"] = True
            if r.random() < 0.15:
                tool["id"] = "call_1"  # a model that always says call_1
            self.emit(tool)
        else:
            state = r.choice(["final", "final", "final", "error", "aborted"])
            end: dict[str, Any] = {"op": "end", "run": run.name, "state": state}
            if state == "error":
                end["error"] = "boom"
            if state == "final" and r.random() < 0.05:
                end["yielded"] = True
            self.emit(end)

    def target(self) -> dict[str, Any]:
        m = self.model
        if len(m.live) > 1 and m.stable and not m.slowed and self.r.random() < 0.5:
            return {"deploy": self.r.choice(m.live)}
        return {}

    def restart(self) -> None:
        mode = self.r.choice(RESTART_MODES)
        op: dict[str, Any] = {"op": "restart", "mode": mode}
        if self.r.random() < 0.15:
            op["down"] = 1
        self.emit(op)
        if self.model.live:
            self.emit({"op": "await_clients", "count": len(self.model.live)})
        if self.model.failing:
            self.emit({"op": "heal"})
        self.emit({"op": "wait"})

    def step(self) -> None:
        r, m = self.r, self.model
        active = m.active()
        choices: list[tuple[float, Callable[[], None]]] = [
            (3.0, self.start_run),
            (0.4, self.burst),
            (5.0 if active else 0.0, lambda: self.drive(active)),
            (0.3, self.send),
            (0.7, lambda: self.emit({"op": "drop", "count": r.randint(1, 5), **self.target()})),
            (0.4, lambda: self.emit({"op": "disconnect", **self.target()})),
            (0.2, lambda: self.emit({"op": "slow", **self.target()})),
            (0.3, self.restart),
            (0.4, self.kill_or_start),
            (0.2 if DEPLOYS[1] not in m.known else 0.0, lambda: self.emit({"op": "connect", "deploy": DEPLOYS[1]})),
            (0.15 if not m.failing else 0.4, self.fail_or_heal),
            (0.1, lambda: self.emit({"op": "sleep", "seconds": r.choice([0.2, 2, 31])})),
            (0.4 if m.can_wait() else 0.0, lambda: self.emit({"op": "wait"})),
            (0.2 if not m.stable and m.live else 0.0, lambda: self.emit({"op": "await_clients", "count": len(m.live)})),
        ]
        total = sum(w for w, _ in choices)
        x = r.random() * total
        for weight, action in choices:
            if x < weight:
                action()
                return
            x -= weight

    def send(self) -> None:
        """A ``chat.send`` from another client: the simulator's fake model answers it (with a tool first)."""
        chat = self.r.choice(CHATS)
        run = self.new_run()
        self.emit({"op": "send", "chat": chat, "run": run, "message": self.r.choice(["Hi", "USE_TOOL please"])})

    def kill_or_start(self) -> None:
        m = self.model
        down = sorted(m.known - set(m.live))
        if down and (not m.live or self.r.random() < 0.6):
            self.emit({"op": "start", "deploy": self.r.choice(down)})
        elif m.live:
            self.emit({"op": "kill", "deploy": self.r.choice(m.live)})

    def fail_or_heal(self) -> None:
        self.emit({"op": "heal"} if self.model.failing else {"op": "fail", "method": "chat.history"})


#: Issue 24's shapes (each a feature of its own, drawn by ``_Shapes``).
SHAPES = ("error-away", "newer-during-restart", "cut-after-tool", "owui-teardown", "heartbeat-after-silent")
#: How often a seed gets a section of them (after the body its main stream drew, which is unchanged).
SHAPE_SHARE = 0.5
ERRORS = ("boom", "rate limit reached", "The model refused the request.")


class _Shapes:
    """The shapes that produced issue 24's defects, drawn from a stream of their own (``random.Random`` seeded
    from the seed and a label), played after the body the seed's main stream drew and that body's tail (every
    run ended, owc connected, quiet): a seed's earlier ops are the same file as before, and a seed whose stream
    draws no section is the same schedule as before (so ``CI_SEEDS`` keep meaning what they meant)."""

    def __init__(self, gen: _Gen, seed: int) -> None:
        self.g = gen
        self.r = random.Random(f"issue-24 shapes {seed}")

    def section(self) -> None:
        if self.r.random() >= SHAPE_SHARE:
            return
        g = self.g
        for kind in self.r.sample(SHAPES, self.r.randint(1, 2)):
            g.body += g.model.tail()  # from a quiet start: nothing pending, owc connected
            getattr(self, kind.replace("-", "_"))()

    def put(self, op: dict[str, Any]) -> bool:
        ops = self.g.model.repair(op)
        self.g.body += ops
        return bool(ops) and ops[-1] is op

    def driven(self, chat: str, *, heartbeat: bool = False) -> str:
        name = self.g.new_run()
        op: dict[str, Any] = {"op": "run", "run": name, "chat": chat, "origin": "heartbeat" if heartbeat else "cron"}
        if heartbeat:
            op["heartbeat"] = True
        elif self.r.random() < 0.5:
            op["user_text"] = "Wake up."
        self.put(op)
        return name

    def back(self, deploy: str | None = None) -> None:
        m = self.g.model
        if deploy is not None and deploy not in m.live:
            self.put({"op": "start", "deploy": deploy})
        if m.live:
            self.put({"op": "await_clients", "count": len(m.live)})

    def error_away(self) -> None:
        """A run that ends with an error while owc is away (its socket cut, its process dead) or while its events
        are dropped (the error's seq after a gap): the message must show the error as a live one does."""
        r, m = self.r, self.g.model
        name = self.driven(r.choice(CHATS))
        self.put({"op": "text", "run": name, "text": r.choice(TEXTS)})
        if r.random() < 0.3:
            self.put({"op": "tool", "run": name, "name": "exec", "args": {"i": 1}, "result": "ok"})
        fault = r.choice(["drop", "disconnect", "kill"])
        if fault == "drop":
            self.put({"op": "drop", "count": r.randint(2, 8)})
            if r.random() < 0.5:
                self.put({"op": "text", "run": name, "text": " " + r.choice(TEXTS)})
        elif fault == "disconnect":
            self.put({"op": "disconnect"})
        killed = list(m.live) if fault == "kill" else []
        for deploy in killed:  # every process: nobody sees the error live
            self.put({"op": "kill", "deploy": deploy})
        self.put({"op": "end", "run": name, "state": "error", "error": r.choice(ERRORS)})
        for deploy in killed:
            self.put({"op": "start", "deploy": deploy})
        self.back()
        self.put({"op": "wait"})

    def newer_during_restart(self) -> None:
        """A Gateway restart cuts a run; before the boot's recovery begins (``recovery_delay``), a newer run
        starts on the key: the Gateway starts the recovery first and the newer run queues behind it (measured on
        2026.9.6); the recovery still belongs in the cut run's message (link rule E)."""
        r = self.r
        chat = r.choice(CHATS)
        name = self.driven(chat)
        self.put({"op": "text", "run": name, "text": r.choice(TEXTS)})
        if r.random() < 0.5:
            self.put({"op": "tool", "run": name, "name": "exec", "args": {"i": 2}, "result": "ok"})
            self.put({"op": "text", "run": name, "text": r.choice(TEXTS)})
        restart: dict[str, Any] = {"op": "restart", "mode": r.choice(["restart", "crash", "stop"])}
        restart["recovery_delay"] = r.choice([2, 3, 4])
        self.put(restart)
        newer = self.g.new_run()
        op: dict[str, Any] = {"op": "run", "run": newer, "chat": chat, "origin": r.choice(["cron", "sessions_send"])}
        if r.random() < 0.5:
            op["user_text"] = "Another thing."
        op["steps"] = [{"text": r.choice(TEXTS)}, {"end": "final"}]
        self.put(op)
        self.back()
        self.put({"op": "wait"})

    def cut_after_tool(self) -> None:
        """A run streams text after a tool call and a Gateway stop (past its drain) or crash cuts it: the
        transcript loses that tail, the message must not."""
        r = self.r
        name = self.driven(r.choice(CHATS))
        if r.random() < 0.5:
            self.put({"op": "text", "run": name, "text": r.choice(TEXTS)})
        self.put({"op": "tool", "run": name, "name": "exec", "args": {"i": 3}, "result": "ok"})
        self.put({"op": "text", "run": name, "text": r.choice(TEXTS)})
        self.put({"op": "restart", "mode": r.choice(["stop", "crash", "restart"])})
        self.back()
        self.put({"op": "wait"})

    def owui_teardown(self) -> None:
        """A user turn's request streams the start of its reply; Open WebUI's cancel path saves the reply
        ``done: true`` and the process dies before the handover: the next process must finish it."""
        r, g, m = self.r, self.g, self.g.model
        chat = r.choice(CHATS)
        g.n += 1
        user, placeholder = f"u{g.n}", f"m{g.n}"
        self.put({"op": "owui_message", "chat": chat, "message": user, "text": "Tell me."})
        self.put({"op": "owui_message", "chat": chat, "message": placeholder, "role": "assistant"})
        name = g.new_run()
        if not self.put({"op": "run", "run": name, "chat": chat, "reply_to": placeholder}):
            return
        first = "First part,"
        self.put({"op": "text", "run": name, "text": first})
        # The Pipe holds M for its process before it sends the turn (``owc/runs/inline.py``): the cancel's save
        # comes after owc holds it. Where owc cannot be waited on to hold it, no teardown: the run just ends.
        if not self.put({"op": "wait_claimed", "run": name}):
            self.put({"op": "end", "run": name})
            return
        deploy = m.live[0] if m.live else DEPLOYS[0]
        self.put({"op": "teardown", "chat": chat, "message": placeholder, "deploy": deploy, "text": first})
        if r.random() < 0.4:
            self.put({"op": "tool", "run": name, "name": "exec", "args": {"i": 4}, "result": "ok"})
        self.put({"op": "text", "run": name, "text": " and the rest."})
        self.put({"op": "end", "run": name})
        self.back(deploy)
        self.put({"op": "wait"})

    def heartbeat_after_silent(self) -> None:
        """A silent heartbeat (``HEARTBEAT_OK``), then a heartbeat that speaks, on one chat's key (owc sometimes
        away): chat.history hides both prompts, so the speaking one's reply is easily taken for a turn."""
        r, m = self.r, self.g.model
        chat = r.choice(CHATS)
        away = r.random() < 0.5
        deploy = m.live[0] if m.live else None
        for _ in range(r.randint(1, 2)):
            beat = self.driven(chat, heartbeat=True)
            self.put({"op": "text", "run": beat, "text": "HEARTBEAT_OK"})
            self.put({"op": "end", "run": beat})
        if away and deploy is not None:
            self.put(r.choice([{"op": "disconnect"}, {"op": "kill", "deploy": deploy}]))
        beat = self.driven(chat, heartbeat=True)
        self.put({"op": "text", "run": beat, "text": r.choice(TEXTS)})
        if r.random() < 0.3:
            self.put({"op": "tool", "run": beat, "name": "exec", "args": {"i": 5}, "result": "ok"})
        self.put({"op": "end", "run": beat})
        self.back(deploy)
        self.put({"op": "wait"})


def generate(seed: int) -> Schedule:
    """The schedule of ``seed`` (the same seed always gives the same file): the body its main stream draws,
    then, for about half the seeds, a section of issue 24's shapes from a stream of their own (``_Shapes``)."""
    gen = _Gen(seed)
    for _ in range(gen.r.randint(8, 40)):
        gen.step()
    _Shapes(gen, seed).section()
    return build(gen.body, seed)


# ------------------------------------------------------------------ shrinking


def shrinking(schedule: Schedule, *, budget: int = 400) -> Generator[Schedule, bool, Schedule]:
    """Delta debugging (ddmin) over the body's ops, as a generator: it yields each candidate (rebuilt by
    ``build``, so valid) and is sent whether that candidate still fails; it returns the smallest failing
    schedule found within ``budget`` candidates. A plain and an async driver share it."""
    body = list(schedule.body)
    plays = 0
    n = 2
    while body and plays < budget:
        chunk = max(1, len(body) // n)
        pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)]
        reduced = False
        for i in range(len(pieces)):
            if plays >= budget:
                break
            candidate = build([op for j, p in enumerate(pieces) if j != i for op in p], None)
            plays += 1
            if (yield candidate):
                body = candidate.body
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(body), n * 2)
    return build(body, None)


def shrink(schedule: Schedule, fails: Callable[[Schedule], bool], *, budget: int = 400) -> Schedule:
    """The smallest schedule found that still ``fails`` (see ``shrinking``)."""
    steps = shrinking(schedule, budget=budget)
    try:
        candidate = next(steps)
        while True:
            candidate = steps.send(fails(candidate))
    except StopIteration as stop:
        return stop.value
