"""Scenario files: a JSON-lines language over the simulator's API (documented in ``docs/scenarios.md``).

One JSON object a line, each with an ``op``. Blank lines and lines starting with ``#`` are skipped. Parsing
is pure and names the line of every mistake; playing needs a running ``Simulator`` and, for the ops that
concern owc itself (``connect``, ``kill``, ``start``) and for Open WebUI chats in a database, a ``Host``
that ``owc scenario run`` provides. Played against the bare simulator (``owc sim --scenario``), those ops
are refused with a clear error, and ``chat`` only names the chat's session key.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import attrs
import orjson
import trio

from owc import ids
from owc.sim.model import RECOVERY_PROVENANCE
from owc.sim.script import Delay, End, Hold, Step, Text, Tool
from owc.sim.server import RESTART_MODES, SimRun, Simulator

log = logging.getLogger("owc.sim.scenario")

END_STATES = ("final", "error", "aborted")


class ScenarioError(ValueError):
    """A scenario that cannot be parsed or played; the message names the line."""


@attrs.frozen
class Op:
    line: int
    op: str
    args: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.args.get(key, default)


#: op -> (required keys, optional keys)
SCHEMA: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "chat": (frozenset({"chat"}), frozenset({"user", "id", "agent", "title", "runtime"})),
    "key": (frozenset({"name", "key"}), frozenset()),
    "run": (
        frozenset({"run"}),
        frozenset(
            {"chat", "key", "id", "origin", "heartbeat", "user_text", "hide_ids", "steps", "reply_to", "runtime"}
        ),
    ),
    "recovery": (frozenset({"run"}), frozenset({"chat", "key", "id", "steps"})),
    "stub": (frozenset({"chat", "message"}), frozenset({"text"})),
    "owui_message": (frozenset({"chat", "message"}), frozenset({"role", "text", "done", "parent", "current"})),
    "current": (frozenset({"chat", "message"}), frozenset()),
    "fail": (frozenset({"method"}), frozenset({"deploy"})),
    "stall": (frozenset({"method"}), frozenset({"deploy", "seconds"})),
    "heal": (frozenset(), frozenset({"deploy"})),
    "await_held": (frozenset({"method"}), frozenset({"deploy", "count"})),
    "wait_claimed": (frozenset({"run"}), frozenset({"deploy"})),
    "send": (frozenset({"run", "message"}), frozenset({"chat", "key", "deploy"})),
    "text": (frozenset({"run", "text"}), frozenset({"chunks"})),
    "tool": (frozenset({"run", "name"}), frozenset({"args", "result", "error", "id"})),
    "end": (frozenset({"run"}), frozenset({"state", "yielded", "error", "stop_reason"})),
    "release": (frozenset({"run"}), frozenset()),
    "steer": (frozenset({"run", "text"}), frozenset({"from"})),
    "stop": (frozenset({"chat"}), frozenset({"deploy"})),
    "drop": (frozenset({"count"}), frozenset({"deploy"})),
    "slow": (frozenset(), frozenset({"deploy"})),
    "disconnect": (frozenset(), frozenset({"deploy"})),
    "restart": (frozenset({"mode"}), frozenset({"down", "recovery_delay"})),
    "teardown": (frozenset({"chat", "message", "deploy"}), frozenset({"text"})),
    "connect": (frozenset({"deploy"}), frozenset({"process"})),
    "kill": (frozenset({"deploy"}), frozenset()),
    "start": (frozenset({"deploy"}), frozenset()),
    "sleep": (frozenset({"seconds"}), frozenset()),
    "await_clients": (frozenset(), frozenset({"count", "deploy"})),
    "wait": (frozenset(), frozenset()),
    "expect": (
        frozenset(),
        frozenset(
            {"chat", "run", "messages", "count", "current", "text", "contains", "done", "cards", "error", "absent"}
            | {"parent"}
        ),
    ),
}
RUNTIMES = ("embedded", "cli")
#: What an ``expect`` may say about a run's message, and about a chat.
EXPECT_RUN = frozenset({"text", "contains", "done", "cards", "error", "absent", "parent"})
EXPECT_CHAT = frozenset({"messages", "count", "current"})


def parse_scenario(text: str, *, through_owc: bool = False) -> list[Op]:
    """Parse a scenario; every mistake, and every scenario that could never finish, raises ``ScenarioError``
    naming its line. ``through_owc``: it will play under ``owc scenario run``, whose one deploy ``owc`` runs
    from the start when the file has no ``connect``."""
    ops: list[Op] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(value, dict) or not isinstance(value.get("op"), str):
            raise ScenarioError(f"line {number}: each line must be a JSON object with a string 'op'")
        name = value.pop("op")
        if name not in SCHEMA:
            raise ScenarioError(f"line {number}: unknown op {name!r} (known: {', '.join(sorted(SCHEMA))})")
        required, optional = SCHEMA[name]
        missing = required - value.keys()
        if missing:
            raise ScenarioError(f"line {number}: op {name!r} needs {', '.join(sorted(missing))}")
        extra = value.keys() - required - optional
        if extra:
            raise ScenarioError(f"line {number}: op {name!r} does not take {', '.join(sorted(extra))}")
        ops.append(Op(number, name, value))
    _check_references(ops)
    _check_deploys(ops, through_owc=through_owc)
    _check_finishable(ops)
    return ops


def _unknown_chat(op: Op, chat: Any) -> ScenarioError:
    return ScenarioError(f"line {op.line}: unknown chat {chat!r} (declare it with a 'chat' op first)")


def _check_references(ops: Sequence[Op]) -> None:
    """Catch a misspelt chat, run or message name at parse time, not halfway through a play."""
    chats: set[str] = set()
    keys: set[str] = set()
    runs: dict[str, str | None] = {}  # run name -> its chat name (None: a key's)
    stubs: dict[str, str] = {}  # assistant placeholders (stub, owui_message) -> chat name
    messages: dict[str, str] = {}  # every Open WebUI-side message name -> chat name
    for op in ops:
        if op.op == "chat":
            chats.add(op.get("chat"))
            if op.get("runtime", "embedded") not in RUNTIMES:
                raise ScenarioError(f"line {op.line}: runtime must be one of {', '.join(RUNTIMES)}")
        elif op.op in ("stub", "owui_message", "current", "stop", "teardown"):
            if op.get("chat") not in chats:
                raise _unknown_chat(op, op.get("chat"))
            if op.op == "teardown" and stubs.get(op.get("message")) != op.get("chat"):
                raise ScenarioError(
                    f"line {op.line}: teardown needs an assistant placeholder ('stub' or 'owui_message') of this chat"
                )
            if op.op == "current" and messages.get(op.get("message")) != op.get("chat"):
                if runs.get(op.get("message"), "") != op.get("chat"):
                    raise ScenarioError(f"line {op.line}: unknown message or run {op.get('message')!r} of this chat")
            if op.op in ("stub", "owui_message"):
                if op.get("message") in messages or op.get("message") in runs:
                    raise ScenarioError(f"line {op.line}: message name {op.get('message')!r} already used")
                messages[op.get("message")] = op.get("chat")
                role = op.get("role", "user" if op.op == "owui_message" else "assistant")
                if role not in ("user", "assistant"):
                    raise ScenarioError(f"line {op.line}: role must be 'user' or 'assistant'")
                if role == "assistant":
                    stubs[op.get("message")] = op.get("chat")
                parent = op.get("parent")
                if (
                    parent is not None
                    and messages.get(parent) != op.get("chat")
                    and runs.get(parent, "") != op.get("chat")
                ):
                    raise ScenarioError(f"line {op.line}: parent {parent!r} is no message or run of this chat")
        elif op.op == "key":
            keys.add(op.get("name"))
        elif op.op in ("run", "send", "recovery"):
            chat, key = op.get("chat"), op.get("key")
            if (chat is None) == (key is None):
                raise ScenarioError(f"line {op.line}: op {op.op!r} needs exactly one of 'chat' or 'key'")
            if chat is not None and chat not in chats:
                raise _unknown_chat(op, chat)
            if key is not None and key not in keys and ":" not in key:
                raise ScenarioError(
                    f"line {op.line}: unknown key {key!r} (declare it with a 'key' op or give a full key)"
                )
            if op.get("run") in runs or op.get("run") in messages:
                raise ScenarioError(f"line {op.line}: run {op.get('run')!r} already started")
            reply_to = op.get("reply_to")
            if reply_to is not None and (op.op != "run" or stubs.get(reply_to) != chat or op.get("id") is not None):
                raise ScenarioError(
                    f"line {op.line}: reply_to needs a 'stub' of the same chat declared before (and no 'id')"
                )
            if op.get("runtime", "embedded") not in RUNTIMES:
                raise ScenarioError(f"line {op.line}: runtime must be one of {', '.join(RUNTIMES)}")
            runs[op.get("run")] = chat
        elif op.op in ("text", "tool", "end", "wait_claimed", "release", "steer") and op.get("run") not in runs:
            raise ScenarioError(f"line {op.line}: unknown run {op.get('run')!r}")
        if op.op == "steer" and op.get("from") is not None and op.get("from") not in runs:
            raise ScenarioError(f"line {op.line}: unknown run {op.get('from')!r}")
        if op.op == "restart" and op.get("mode") not in RESTART_MODES:
            raise ScenarioError(f"line {op.line}: restart mode must be one of {', '.join(RESTART_MODES)}")
        if op.op == "end" and op.get("state", "final") not in END_STATES:
            raise ScenarioError(f"line {op.line}: end state must be one of {', '.join(END_STATES)}")
        if op.op == "expect":
            _check_expect(op, chats, runs, messages)


def _check_expect(op: Op, chats: set[str], runs: dict[str, str | None], messages: dict[str, str]) -> None:
    chat, run = op.get("chat"), op.get("run")
    if (chat is None) == (run is None):
        raise ScenarioError(f"line {op.line}: op 'expect' needs exactly one of 'chat' or 'run'")
    said = set(op.args) - {"chat", "run"}
    allowed = EXPECT_CHAT if chat is not None else EXPECT_RUN
    if not said:
        raise ScenarioError(f"line {op.line}: expect says nothing (one of: {', '.join(sorted(allowed))})")
    if said - allowed:
        raise ScenarioError(
            f"line {op.line}: expect on a {'chat' if chat is not None else 'run'} does not take"
            f" {', '.join(sorted(said - allowed))}"
        )
    if chat is not None and chat not in chats:
        raise _unknown_chat(op, chat)
    if run is not None and run not in runs:
        raise ScenarioError(f"line {op.line}: unknown run {run!r}")
    for ref in (op.get("current"), op.get("parent")):
        if ref is not None and ref not in messages and ref not in runs:
            raise ScenarioError(f"line {op.line}: unknown message or run {ref!r}")
    items = op.get("messages")
    if items is not None:
        if not isinstance(items, list):
            raise ScenarioError(f"line {op.line}: 'messages' is a list of roles or {{role, text, run}} objects")
        for item in items:
            item = {"role": item} if isinstance(item, str) else item
            if (
                not isinstance(item, dict)
                or item.get("role") not in ("user", "assistant")
                or set(item)
                - {
                    "role",
                    "text",
                    "run",
                    "done",
                }
            ):
                raise ScenarioError(f"line {op.line}: each of 'messages' is a role or a {{role, text, run, done}}")
            if item.get("run") is not None and item["run"] not in runs:
                raise ScenarioError(f"line {op.line}: unknown run {item['run']!r}")
    for field in ("count", "cards"):  # a number, and true is no number here
        value = op.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ScenarioError(f"line {op.line}: expect {field} must be a number")
    for field in ("done", "absent"):
        if op.get(field) is not None and not isinstance(op.get(field), bool):
            raise ScenarioError(f"line {op.line}: expect {field} must be true/false")


#: Ops that name a deploy: each must be running when it plays.
DEPLOY_OPS = frozenset(
    {"drop", "slow", "disconnect", "fail", "stall", "heal", "wait_claimed", "await_clients", "send", "stop"}
    | {"await_held"}
)


def _check_deploys(ops: Sequence[Op], *, through_owc: bool) -> None:
    """Deploys must exist where they are named. Only known when owc's deploys are the scenario's own (it has
    ``connect`` ops, or it plays through owc); a bare simulator's clients are whoever connects."""
    managed = any(op.op == "connect" for op in ops)
    if not managed and not through_owc:
        return
    running: set[str] = set() if managed else {"owc"}
    known = set(running)
    for op in ops:
        deploy = op.get("deploy")
        if op.op == "connect":
            if deploy in running:
                raise ScenarioError(f"line {op.line}: deploy {deploy!r} is already running")
            running.add(deploy)
            known.add(deploy)
        elif op.op in ("kill", "teardown"):
            if deploy not in running:
                raise ScenarioError(f"line {op.line}: deploy {deploy!r} is not running (connect it first)")
            running.discard(deploy)
        elif op.op == "start":
            if deploy not in known:
                raise ScenarioError(f"line {op.line}: deploy {deploy!r} was never connected (use 'connect')")
            if deploy in running:
                raise ScenarioError(f"line {op.line}: deploy {deploy!r} is already running")
            running.add(deploy)
        elif op.op in DEPLOY_OPS and deploy is not None and deploy not in running:
            why = "never connected" if deploy not in known else "not running here (killed)"
            raise ScenarioError(f"line {op.line}: op {op.op!r} names deploy {deploy!r}, which is {why}")
        if op.op == "await_clients" and deploy is None and int(op.get("count", 1)) > len(running):
            raise ScenarioError(
                f"line {op.line}: await_clients can never finish: it waits for {op.get('count', 1)} clients and"
                f" {len(running)} deploys run here"
            )


def _steps_end_alone(steps: Any) -> tuple[bool, int]:
    """Whether a run's steps end it by themselves, and how many ``release`` ops its holds need first."""
    holds = 0
    for step in steps if isinstance(steps, list) else ():
        if isinstance(step, dict) and "hold" in step:
            holds += 1
        if isinstance(step, dict) and "end" in step:
            return True, holds
    return False, holds


def _check_finishable(ops: Sequence[Op]) -> None:
    """A ``wait`` must be able to finish: every run started before it ends by itself (its steps end it), or
    by an op before the wait (``end``, a ``restart``, a ``stop`` of its chat, the ``release`` its holds need).
    A ``wait_claimed`` must name a run owc writes a message for."""
    why: dict[str, str] = {}  # run name -> why it never ends, while it does not
    holding: dict[str, tuple[int, bool]] = {}  # run name -> (releases still needed, whether its steps end it)
    planned: dict[str, tuple[str, int, bool]] = {}  # a recovery's run, until the boot that starts it
    chat_of: dict[str, str | None] = {}
    #: Heartbeats (the Gateway hides the run from owc's connection until its end: its message, if it speaks, is
    #: made then) and runs on keys that are no chat's.
    unclaimable: set[str] = set()
    stalled: set[str] = set()  # methods held until a heal, on today's connections
    for op in ops:
        name = op.get("run")
        if op.op == "stall" and op.get("seconds") is None:
            stalled.add(op.get("method"))
        elif op.op in ("stall", "heal", "restart", "disconnect", "kill", "start", "slow", "teardown"):
            stalled.clear()  # a stall belongs to the connections of the moment; a new one is not stalled
        elif op.op == "await_held" and op.get("method") not in stalled:
            raise ScenarioError(
                f"line {op.line}: await_held can never finish: no 'stall' of {op.get('method')!r} (without"
                " seconds) holds requests here"
            )
        if op.op in ("run", "send", "recovery"):
            chat_of[name] = op.get("chat")
            key = op.get("key")
            if op.get("heartbeat") or (key is not None and ":openwebui-" not in str(key)):
                unclaimable.add(name)
            holds, ends = 0, True
            if op.op == "send":
                reason = "its message says SLOW: the model holds" if "SLOW" in op.get("message") else ""
            elif op.get("steps") is None:
                reason = "it is driven (no steps) and has no 'end' before this wait"
            else:
                ends, holds = _steps_end_alone(op.get("steps"))
                reason = "" if ends and not holds else "its steps hold, or never end"
            if op.op == "recovery":
                planned[name] = (reason, holds, ends)
            elif reason:
                why[name], holding[name] = reason, (holds, ends)
        elif op.op == "end":
            why.pop(name, None)
            planned.pop(name, None)
        elif op.op == "release" and name in holding:
            holds, ends = holding[name]
            holding[name] = (holds - 1, ends)
            if holds - 1 <= 0 and ends:
                why.pop(name, None)
        elif op.op == "restart":
            why.clear()  # active runs are ended or cut, queued ones forgotten
            if op.get("mode") in ("restart", "crash"):  # the boot recovers the sessions left running
                for run, (reason, holds, ends) in planned.items():
                    if reason:
                        why[run], holding[run] = reason, (holds, ends)
                planned.clear()
        elif op.op == "stop":
            for run in [r for r in why if chat_of.get(r) == op.get("chat")]:
                del why[run]
        elif op.op == "wait_claimed" and name in unclaimable:
            raise ScenarioError(
                f"line {op.line}: wait_claimed can never finish: owc claims no message for run {name!r} while it"
                " runs (a heartbeat, hidden from owc until its end, or not on a chat's key)"
            )
        elif op.op == "wait" and why:
            run, reason = next(iter(why.items()))
            raise ScenarioError(f"line {op.line}: wait can never finish: run {run!r} never ends ({reason})")


@attrs.frozen
class ChatSpec:
    """An Open WebUI chat a scenario created: its session key follows the key rule."""

    name: str
    chat_id: str
    user_id: str
    agent_id: str = "main"
    title: str = ""

    @property
    def session_key(self) -> str:
        return ids.session_key(self.agent_id, self.user_id, self.chat_id)


class Host(Protocol):
    """What ``owc scenario run`` plugs in: the Open WebUI side and owc's own connections (deploys)."""

    async def create_chat(self, chat: ChatSpec) -> None: ...

    async def create_stub(self, chat: ChatSpec, message_id: str, text: str) -> None:
        """A user turn in ``chat`` and Open WebUI's placeholder ``message_id`` for its reply (``done: false``, no
        writer): what a Pipe request leaves when it dies."""

    async def add_message(self, chat: ChatSpec, message: dict[str, Any], *, current: bool) -> None:
        """A message Open WebUI writes (``parentId`` absent: at the chat's tail; None: a new root)."""

    async def set_current(self, chat: ChatSpec, message_id: str) -> None:
        """The message the chat shows (``currentId``), as when the user picks a branch."""

    async def read_chat(self, chat: ChatSpec) -> dict[str, Any] | None:
        """The chat's JSON as Open WebUI reads it (``expect``)."""

    async def connect(self, deploy: str, process: str | None = None) -> None:
        """Start deploy ``deploy`` in owc process ``process`` (default: a process of its own)."""

    async def send(self, deploy: str, key: str, message: str, run_id: str) -> None:
        """A ``chat.send`` on that deploy's connection."""

    async def stop(self, chat: ChatSpec, deploy: str | None) -> list[str]:
        """The user's Stop in ``chat`` (in the tab that deploy serves, or every deploy's); returns the ids of
        the runs it stopped, once the Gateway has ended them."""

    async def claimed(self, key: str, run_id: str, deploy: str | None) -> None:
        """Return once owc (the deploy, or the only one) holds the run's message."""

    async def kill(self, deploy: str) -> None: ...

    async def teardown(self, chat: ChatSpec, message_id: str, deploy: str, text: str | None) -> None:
        """Open WebUI's process dies in its own teardown: the request's cancel path saves ``message_id``
        ``done: true`` (its content ``text`` if given, else as stored), then ``deploy`` dies before any handover."""

    async def start(self, deploy: str) -> None: ...

    async def settled(self) -> None:
        """Return once owc has finished with every run the simulator has ended."""


def steps_from_json(items: Iterable[Any], line: int) -> list[Step]:
    out: list[Step] = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            raise ScenarioError(f"line {line}: each step is an object with one key (text, tool, hold, delay, end)")
        ((kind, value),) = item.items()
        if kind == "text":
            out.append(Text(str(value)))
        elif kind == "tool":
            out.append(
                Tool(
                    value["name"],
                    value.get("args", {}),
                    value.get("result", ""),
                    bool(value.get("error", False)),
                    value.get("id"),
                )
            )
        elif kind == "hold":
            out.append(Hold())
        elif kind == "delay":
            out.append(Delay(float(value)))
        elif kind == "end":
            value = value if isinstance(value, dict) else {"state": value}
            out.append(End(value.get("state", "final"), bool(value.get("yielded", False)), value.get("error")))
        else:
            raise ScenarioError(f"line {line}: unknown step {kind!r}")
    return out


#: Provenance of an input steered into a running parent: modelled on the announce's own (not measured live).
STEER_PROVENANCE = {"kind": "inter_session", "sourceTool": "subagent_announce"}


class ScenarioPlayer:
    """Plays parsed ops against a simulator, step by step, in file order."""

    def __init__(self, sim: Simulator, host: Host | None = None, *, namespace: str | None = None) -> None:
        self.sim = sim
        self.host = host
        self.chats: dict[str, ChatSpec] = {}
        self.keys: dict[str, str] = {}
        self.runs: dict[str, SimRun] = {}
        self.run_ids: dict[str, str] = {}
        self.run_keys: dict[str, str] = {}  # run name -> its session key (also a planned recovery's)
        self.stubs: dict[str, str] = {}  # Open WebUI-side message name (stub, owui_message) -> message id
        #: ``expect`` ops not checked yet: one right after a ``wait`` is checked at once, any other at the next
        #: ``wait`` (or the end of the play): always where owc has settled.
        self.expectations: list[Op] = []
        self._settled = False
        #: What the checked ``expect`` ops found wrong, each naming its line.
        self.failures: list[str] = []
        self._namespace = uuid.UUID(namespace) if namespace else uuid.uuid4()

    def _need_host(self, op: Op) -> Host:
        if self.host is None:
            raise ScenarioError(
                f"line {op.line}: op {op.op!r} needs owc itself; play this file with `owc scenario run`"
            )
        return self.host

    def _key(self, op: Op) -> str:
        chat = op.get("chat")
        if chat is not None:
            return self.chats[chat].session_key
        key = op.get("key")
        return self.keys.get(key, key)

    def _conn(self, op: Op) -> str | None:
        deploy = op.get("deploy")
        if deploy is None:
            return None
        return deploy

    def _run_id(self, op: Op) -> str:
        return op.get("id") or str(uuid.uuid5(self._namespace, f"run:{op.get('run')}"))

    def _run(self, name: str) -> SimRun:
        """A run's handle; a planned recovery's once the boot has started it."""
        run = self.runs.get(name)
        if run is None:
            run_id = self.run_ids.get(name)
            if run_id is None or run_id not in self.sim.runs:
                raise LookupError(f"run {name!r} has not started (a recovery starts at a boot that recovers it)")
            run = self.runs[name] = self.sim.handle(run_id)
        return run

    def message_id(self, name: str) -> str:
        """The Open WebUI message id of a message name (stub, owui_message) or of a run's message."""
        if name in self.stubs:
            return self.stubs[name]
        mid = ids.message_id(self.run_keys[name], self.run_ids[name])
        if mid is None:
            raise LookupError(f"run {name!r} never has a message")
        return mid

    async def play(self, ops: Sequence[Op]) -> None:
        for op in ops:
            try:
                await self._play_one(op)
                self._settled = op.op == "wait" or (op.op == "expect" and self._settled)
            except ScenarioError:
                raise
            except (LookupError, RuntimeError, ValueError) as exc:
                raise ScenarioError(f"line {op.line}: {op.op}: {exc}") from exc

    def _started(self, name: str, key: str, run: SimRun) -> None:
        self.runs[name], self.run_ids[name], self.run_keys[name] = run, run.run_id, key

    async def _play_one(self, op: Op) -> None:
        sim = self.sim
        if op.op == "chat":
            name = op.get("chat")
            chat_id = op.get("id") or str(uuid.uuid5(self._namespace, f"chat:{name}"))
            spec = ChatSpec(
                name=name,
                chat_id=chat_id,
                user_id=op.get("user", "user-1"),
                agent_id=op.get("agent", "main"),
                title=op.get("title", name),
            )
            self.chats[name] = spec
            if op.get("runtime") == "cli":
                sim.driver.cli_keys.add(spec.session_key)
            if self.host is not None:
                await self.host.create_chat(spec)
        elif op.op == "key":
            self.keys[op.get("name")] = op.get("key")
        elif op.op == "stub":
            chat = self.chats[op.get("chat")]
            self.stubs[op.get("message")] = message_id = str(
                uuid.uuid5(self._namespace, f"message:{op.get('message')}")
            )
            await self._need_host(op).create_stub(chat, message_id, op.get("text", "Hello"))
        elif op.op == "owui_message":
            await self._owui_message(op)
        elif op.op == "current":
            await self._need_host(op).set_current(self.chats[op.get("chat")], self.message_id(op.get("message")))
        elif op.op == "run":
            steps = steps_from_json(op.get("steps"), op.line) if op.get("steps") is not None else None
            run_id = self._run_id(op)
            if op.get("reply_to") is not None:  # the Pipe's own run for that placeholder: its id names it
                run_id = ids.input_run_id(
                    self.chats[op.get("chat")].chat_id, self.stubs[op.get("reply_to")], run_id[:8]
                )
            origin = op.get("origin", "cron")
            runtime = op.get("runtime")
            run = sim.start_run(
                self._key(op),
                run_id,
                origin=origin,
                heartbeat=bool(op.get("heartbeat", False)),
                user_text=op.get("user_text"),
                hide_ids=bool(op.get("hide_ids", False)),
                steps=steps,
                provenance=dict(RECOVERY_PROVENANCE) if origin == "recovery" else None,
                cli_runtime=None if runtime is None else runtime == "cli",
            )
            self._started(op.get("run"), self._key(op), run)
        elif op.op == "recovery":
            # The Gateway's restart recovery of this session at its next boot that recovers it (a restart or a
            # crash that leaves it running) is this run: its id and steps, or driven by text/tool/end.
            steps = steps_from_json(op.get("steps"), op.line) if op.get("steps") is not None else None
            run_id = self._run_id(op)
            sim.plan_recovery(self._key(op), run_id, steps)
            self.run_ids[op.get("run")], self.run_keys[op.get("run")] = run_id, self._key(op)
        elif op.op == "send":
            run_id = self._run_id(op)
            key = self._key(op)
            if op.get("deploy") is not None:
                # owc's own chat.send, on that deploy's connection: the run's sender is that connection.
                await self._need_host(op).send(op.get("deploy"), key, op.get("message"), run_id)
                self._started(op.get("run"), key, sim.handle(run_id))
            else:
                # A chat.send from another client (e.g. a second UI): the simulator's responder plays it.
                steps = list(sim.responder(key, op.get("message")))
                run = sim.start_run(key, run_id, origin="chat.send", user_text=op.get("message"), steps=steps)
                self._started(op.get("run"), key, run)
        elif op.op == "text":
            chunks = op.get("chunks")
            self._run(op.get("run")).text(op.get("text"), chunks)
        elif op.op == "tool":
            self._run(op.get("run")).tool(
                op.get("name"),
                op.get("args", {}),
                op.get("result", ""),
                is_error=bool(op.get("error", False)),
                call_id=op.get("id"),
            )
        elif op.op == "end":
            self._run(op.get("run")).end(
                op.get("state", "final"),
                yielded=bool(op.get("yielded", False)),
                error=op.get("error"),
                stop_reason=op.get("stop_reason"),
            )
        elif op.op == "release":
            self._run(op.get("run")).release()
        elif op.op == "steer":
            provenance = dict(STEER_PROVENANCE)
            if op.get("from") is not None:
                provenance["sourceSessionKey"] = self.run_keys[op.get("from")]
            self._run(op.get("run")).steer(op.get("text"), provenance)
        elif op.op == "stop":
            await self._need_host(op).stop(self.chats[op.get("chat")], op.get("deploy"))
        elif op.op == "drop":
            sim.drop(int(op.get("count")), conn=self._conn(op))
        elif op.op == "slow":
            sim.slow_consumer(self._conn(op))
        elif op.op == "wait_claimed":
            run = self._run(op.get("run"))
            await self._need_host(op).claimed(run.run.key, run.run_id, op.get("deploy"))
        elif op.op == "fail":
            sim.fail_requests(op.get("method"), conn=self._conn(op))
        elif op.op == "stall":
            seconds = op.get("seconds")
            sim.stall_requests(
                op.get("method"), conn=self._conn(op), seconds=None if seconds is None else float(seconds)
            )
        elif op.op == "heal":
            sim.fail_requests(conn=self._conn(op))
        elif op.op == "await_held":
            deploy, method, count = op.get("deploy"), op.get("method"), int(op.get("count", 1))
            await sim.wait_for(
                lambda: (
                    sum(
                        1
                        for c in sim.conns.values()
                        if deploy in (None, c.instance_id)
                        for frame in c.held
                        if frame.method == method
                    )
                    >= count
                )
            )
        elif op.op == "disconnect":
            sim.disconnect(self._conn(op))
        elif op.op == "restart":
            await sim.restart(
                op.get("mode"),
                down_seconds=float(op.get("down", 0)),
                recovery_delay=float(op.get("recovery_delay", 0)),
            )
        elif op.op == "teardown":
            await self._need_host(op).teardown(
                self.chats[op.get("chat")], self.message_id(op.get("message")), op.get("deploy"), op.get("text")
            )
        elif op.op == "connect":
            host = self._need_host(op)
            if op.get("process") is None:
                await host.connect(op.get("deploy"))
            else:
                await host.connect(op.get("deploy"), process=op.get("process"))
        elif op.op in ("kill", "start"):
            await getattr(self._need_host(op), op.op)(op.get("deploy"))
        elif op.op == "sleep":
            await trio.sleep(float(op.get("seconds")))
        elif op.op == "await_clients":
            deploy = op.get("deploy")
            if deploy is not None:
                await sim.wait_for(
                    lambda: any(c.instance_id == deploy and c.subscribed and not c.closing for c in sim.conns.values())
                )
            else:
                count = int(op.get("count", 1))
                await sim.wait_for(
                    lambda: sum(1 for c in sim.conns.values() if c.subscribed and not c.closing) >= count
                )
        elif op.op == "wait":
            await sim.wait_for(sim.quiescent)
            if self.host is not None:
                await self.host.settled()
                await self.check_expectations()
        elif op.op == "expect":
            if self.host is None or not getattr(self.host, "writes_messages", True):
                # Against the bare simulator (or only a database, ``owc sim --db``) no owc writes messages here.
                log.info("scenario.expect_skipped line=%d (no owc: play it with `owc scenario run`)", op.line)
                return
            self.expectations.append(op)
            if self._settled:
                await self.check_expectations()
        else:  # pragma: no cover - SCHEMA and this chain are kept in step by test_every_op_is_played
            raise ScenarioError(f"line {op.line}: op {op.op!r} is not implemented")

    async def _owui_message(self, op: Op) -> None:
        chat = self.chats[op.get("chat")]
        name = op.get("message")
        self.stubs[name] = message_id = str(uuid.uuid5(self._namespace, f"message:{name}"))
        role = op.get("role", "user")
        message: dict[str, Any] = {"id": message_id, "role": role, "content": op.get("text", "")}
        if role == "assistant":
            message.update(done=bool(op.get("done", False)), model="openclaw")
        else:
            message["models"] = ["openclaw"]
        if "parent" in op.args:  # absent: at the chat's tail; null: a new root
            parent = op.get("parent")
            message["parentId"] = None if parent is None else self.message_id(parent)
        await self._need_host(op).add_message(chat, message, current=bool(op.get("current", True)))

    async def check_expectations(self) -> None:
        """Check the ``expect`` ops not checked yet against what owc left in the database."""
        pending, self.expectations = self.expectations, []
        for op in pending:
            self.failures += [f"line {op.line}: expect: {problem}" for problem in await self._check(op)]

    async def _check(self, op: Op) -> list[str]:
        host = self._need_host(op)
        if op.get("chat") is not None:
            chat = await host.read_chat(self.chats[op.get("chat")])
            history = (chat or {}).get("history") or {}
            return self._check_chat(op, history.get("messages") or {}, history.get("currentId"))
        name = op.get("run")
        key = self.run_keys[name]
        spec = next((c for c in self.chats.values() if c.session_key == key), None)
        if spec is None:
            return [f"run {name!r} is on no chat's key"]
        chat = await host.read_chat(spec)
        messages = ((chat or {}).get("history") or {}).get("messages") or {}
        message = messages.get(self.message_id(name))
        if op.get("absent") is not None:
            if (message is None) != op.get("absent"):
                return [f"run {name!r}: its message is {'absent' if message is None else 'there'}"]
            if message is None:
                return []
        if message is None:
            return [f"run {name!r} has no message"]
        return self._check_message(op, name, message)

    def _check_message(self, op: Op, name: str, message: dict[str, Any]) -> list[str]:
        problems = []
        content = message.get("content") or ""
        if op.get("text") is not None and content != op.get("text"):
            problems.append(f"run {name!r}: text {content!r}, expected {op.get('text')!r}")
        if op.get("contains") is not None and op.get("contains") not in content:
            problems.append(f"run {name!r}: text {content!r} lacks {op.get('contains')!r}")
        if op.get("done") is not None and (message.get("done") is True) != op.get("done"):
            problems.append(f"run {name!r}: done is {message.get('done')!r}")
        if op.get("cards") is not None:
            cards = sum(1 for item in message.get("output") or [] if item.get("type") == "function_call")
            if cards != op.get("cards"):
                problems.append(f"run {name!r}: {cards} tool cards, expected {op.get('cards')}")
        error = (message.get("error") or {}).get("content") if isinstance(message.get("error"), dict) else None
        wanted = op.get("error")
        if wanted is not None and (
            (wanted is True and not error)
            or (wanted is False and error)
            or (isinstance(wanted, str) and error != wanted)
        ):
            problems.append(f"run {name!r}: error {error!r}, expected {wanted!r}")
        if op.get("parent") is not None and message.get("parentId") != self.message_id(op.get("parent")):
            problems.append(f"run {name!r}: parent {message.get('parentId')!r}, expected {op.get('parent')!r}")
        return problems

    def _check_chat(self, op: Op, messages: dict[str, Any], current: Any) -> list[str]:
        problems = []
        name = op.get("chat")
        if op.get("count") is not None and len(messages) != op.get("count"):
            problems.append(f"chat {name!r}: {len(messages)} messages, expected {op.get('count')}")
        if op.get("current") is not None and current != self.message_id(op.get("current")):
            problems.append(f"chat {name!r}: currentId {current!r}, expected {op.get('current')!r}")
        wanted = op.get("messages")
        if wanted is not None:
            path: list[dict[str, Any]] = []  # root -> currentId: what the chat shows
            seen: set[str] = set()
            node = messages.get(current) if isinstance(current, str) else None
            while isinstance(node, dict) and node.get("id") not in seen:
                seen.add(node.get("id"))
                path.append(node)
                node = messages.get(node.get("parentId") or "")
            path.reverse()
            shown = [f"{m.get('role')}:{(m.get('content') or '')[:40]!r}" for m in path]
            if len(path) != len(wanted):
                problems.append(f"chat {name!r} shows {len(path)} messages, expected {len(wanted)}: {shown}")
            for i, (item, message) in enumerate(zip(wanted, path)):
                item = {"role": item} if isinstance(item, str) else item
                if message.get("role") != item["role"]:
                    problems.append(
                        f"chat {name!r} message {i + 1}: role {message.get('role')!r}, expected {item['role']!r}"
                    )
                if item.get("text") is not None and message.get("content") != item["text"]:
                    problems.append(
                        f"chat {name!r} message {i + 1}: text {message.get('content')!r}, expected {item['text']!r}"
                    )
                if item.get("run") is not None and message.get("id") != self.message_id(item["run"]):
                    problems.append(f"chat {name!r} message {i + 1} is not run {item['run']!r}'s")
                if item.get("done") is not None and (message.get("done") is True) != item["done"]:
                    problems.append(f"chat {name!r} message {i + 1}: done is {message.get('done')!r}")
        return problems


async def play_file(sim: Simulator, text: str, host: Host | None = None) -> ScenarioPlayer:
    player = ScenarioPlayer(sim, host)
    await player.play(parse_scenario(text))
    return player
