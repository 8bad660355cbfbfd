"""Scenario files: a JSON-lines language over the simulator's API (documented in ``docs/scenarios.md``).

One JSON object a line, each with an ``op``. Blank lines and lines starting with ``#`` are skipped. Parsing
is pure and names the line of every mistake; playing needs a running ``Simulator`` and, for the ops that
concern owc itself (``connect``, ``kill``, ``start``) and for Open WebUI chats in a database, a ``Host``
that ``owc scenario run`` provides. Played against the bare simulator (``owc sim --scenario``), those ops
are refused with a clear error, and ``chat`` only names the chat's session key.
"""

from __future__ import annotations

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
    "chat": (frozenset({"chat"}), frozenset({"user", "id", "agent", "title"})),
    "key": (frozenset({"name", "key"}), frozenset()),
    "run": (
        frozenset({"run"}),
        frozenset({"chat", "key", "id", "origin", "heartbeat", "user_text", "hide_ids", "steps", "reply_to"}),
    ),
    "stub": (frozenset({"chat", "message"}), frozenset({"text"})),
    "fail": (frozenset({"method"}), frozenset({"deploy"})),
    "heal": (frozenset(), frozenset({"deploy"})),
    "wait_claimed": (frozenset({"run"}), frozenset({"deploy"})),
    "send": (frozenset({"run", "message"}), frozenset({"chat", "key", "deploy"})),
    "text": (frozenset({"run", "text"}), frozenset({"chunks"})),
    "tool": (frozenset({"run", "name"}), frozenset({"args", "result", "error", "id"})),
    "end": (frozenset({"run"}), frozenset({"state", "yielded", "error", "stop_reason"})),
    "drop": (frozenset({"count"}), frozenset({"deploy"})),
    "slow": (frozenset(), frozenset({"deploy"})),
    "disconnect": (frozenset(), frozenset({"deploy"})),
    "restart": (frozenset({"mode"}), frozenset({"down"})),
    "connect": (frozenset({"deploy"}), frozenset()),
    "kill": (frozenset({"deploy"}), frozenset()),
    "start": (frozenset({"deploy"}), frozenset()),
    "sleep": (frozenset({"seconds"}), frozenset()),
    "await_clients": (frozenset(), frozenset({"count"})),
    "wait": (frozenset(), frozenset()),
}


def parse_scenario(text: str) -> list[Op]:
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
    return ops


def _check_references(ops: Sequence[Op]) -> None:
    """Catch a misspelt chat or run name at parse time, not halfway through a play."""
    chats: set[str] = set()
    keys: set[str] = set()
    runs: set[str] = set()
    stubs: dict[str, str] = {}
    for op in ops:
        if op.op == "chat":
            chats.add(op.get("chat"))
        elif op.op == "stub":
            if op.get("chat") not in chats:
                raise ScenarioError(
                    f"line {op.line}: unknown chat {op.get('chat')!r} (declare it with a 'chat' op first)"
                )
            stubs[op.get("message")] = op.get("chat")
        elif op.op == "key":
            keys.add(op.get("name"))
        elif op.op in ("run", "send"):
            chat, key = op.get("chat"), op.get("key")
            if (chat is None) == (key is None):
                raise ScenarioError(f"line {op.line}: op {op.op!r} needs exactly one of 'chat' or 'key'")
            if chat is not None and chat not in chats:
                raise ScenarioError(f"line {op.line}: unknown chat {chat!r} (declare it with a 'chat' op first)")
            if key is not None and key not in keys and ":" not in key:
                raise ScenarioError(
                    f"line {op.line}: unknown key {key!r} (declare it with a 'key' op or give a full key)"
                )
            if op.get("run") in runs:
                raise ScenarioError(f"line {op.line}: run {op.get('run')!r} already started")
            reply_to = op.get("reply_to")
            if reply_to is not None and (op.op != "run" or stubs.get(reply_to) != chat or op.get("id") is not None):
                raise ScenarioError(
                    f"line {op.line}: reply_to needs a 'stub' of the same chat declared before (and no 'id')"
                )
            runs.add(op.get("run"))
        elif op.op in ("text", "tool", "end", "wait_claimed") and op.get("run") not in runs:
            raise ScenarioError(f"line {op.line}: unknown run {op.get('run')!r}")
        if op.op == "restart" and op.get("mode") not in RESTART_MODES:
            raise ScenarioError(f"line {op.line}: restart mode must be one of {', '.join(RESTART_MODES)}")
        if op.op == "end" and op.get("state", "final") not in END_STATES:
            raise ScenarioError(f"line {op.line}: end state must be one of {', '.join(END_STATES)}")


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

    async def connect(self, deploy: str) -> None: ...

    async def claimed(self, key: str, run_id: str, deploy: str | None) -> None:
        """Return once owc (the deploy, or the only one) holds the run's message."""

    async def kill(self, deploy: str) -> None: ...

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


class ScenarioPlayer:
    """Plays parsed ops against a simulator, step by step, in file order."""

    def __init__(self, sim: Simulator, host: Host | None = None, *, namespace: str | None = None) -> None:
        self.sim = sim
        self.host = host
        self.chats: dict[str, ChatSpec] = {}
        self.keys: dict[str, str] = {}
        self.runs: dict[str, SimRun] = {}
        self.run_ids: dict[str, str] = {}
        self.stubs: dict[str, str] = {}  # placeholder name -> message id
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

    async def play(self, ops: Sequence[Op]) -> None:
        for op in ops:
            try:
                await self._play_one(op)
            except ScenarioError:
                raise
            except (LookupError, RuntimeError, ValueError) as exc:
                raise ScenarioError(f"line {op.line}: {op.op}: {exc}") from exc

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
        elif op.op == "run":
            steps = steps_from_json(op.get("steps"), op.line) if op.get("steps") is not None else None
            run_id = op.get("id") or str(uuid.uuid5(self._namespace, f"run:{op.get('run')}"))
            if op.get("reply_to") is not None:  # the Pipe's own run for that placeholder: its id names it
                run_id = ids.input_run_id(
                    self.chats[op.get("chat")].chat_id, self.stubs[op.get("reply_to")], run_id[:8]
                )
            origin = op.get("origin", "cron")
            run = sim.start_run(
                self._key(op),
                run_id,
                origin=origin,
                heartbeat=bool(op.get("heartbeat", False)),
                user_text=op.get("user_text"),
                hide_ids=bool(op.get("hide_ids", False)),
                steps=steps,
                provenance=dict(RECOVERY_PROVENANCE) if origin == "recovery" else None,
            )
            self.runs[op.get("run")] = run
            self.run_ids[op.get("run")] = run.run_id
        elif op.op == "send":
            # A chat.send from another client (e.g. a second UI): the simulator's responder plays it.
            run_id = str(uuid.uuid5(self._namespace, f"run:{op.get('run')}"))
            steps = list(sim.responder(self._key(op), op.get("message")))
            run = sim.start_run(self._key(op), run_id, origin="chat.send", user_text=op.get("message"), steps=steps)
            self.runs[op.get("run")] = run
            self.run_ids[op.get("run")] = run_id
        elif op.op == "text":
            chunks = op.get("chunks")
            self.runs[op.get("run")].text(op.get("text"), chunks)
        elif op.op == "tool":
            self.runs[op.get("run")].tool(
                op.get("name"),
                op.get("args", {}),
                op.get("result", ""),
                is_error=bool(op.get("error", False)),
                call_id=op.get("id"),
            )
        elif op.op == "end":
            self.runs[op.get("run")].end(
                op.get("state", "final"),
                yielded=bool(op.get("yielded", False)),
                error=op.get("error"),
                stop_reason=op.get("stop_reason"),
            )
        elif op.op == "drop":
            sim.drop(int(op.get("count")), conn=self._conn(op))
        elif op.op == "slow":
            sim.slow_consumer(self._conn(op))
        elif op.op == "wait_claimed":
            run = self.runs[op.get("run")]
            await self._need_host(op).claimed(run.run.key, run.run_id, op.get("deploy"))
        elif op.op == "fail":
            sim.fail_requests(op.get("method"), conn=self._conn(op))
        elif op.op == "heal":
            sim.fail_requests(conn=self._conn(op))
        elif op.op == "disconnect":
            sim.disconnect(self._conn(op))
        elif op.op == "restart":
            await sim.restart(op.get("mode"), down_seconds=float(op.get("down", 0)))
        elif op.op in ("connect", "kill", "start"):
            await getattr(self._need_host(op), op.op)(op.get("deploy"))
        elif op.op == "sleep":
            await trio.sleep(float(op.get("seconds")))
        elif op.op == "await_clients":
            count = int(op.get("count", 1))
            await sim.wait_for(lambda: sum(1 for c in sim.conns.values() if c.subscribed and not c.closing) >= count)
        elif op.op == "wait":
            await sim.wait_for(sim.quiescent)
            if self.host is not None:
                await self.host.settled()
        else:  # pragma: no cover - SCHEMA and this chain are kept in step by test_every_op_is_played
            raise ScenarioError(f"line {op.line}: op {op.op!r} is not implemented")


async def play_file(sim: Simulator, text: str, host: Host | None = None) -> ScenarioPlayer:
    player = ScenarioPlayer(sim, host)
    await player.play(parse_scenario(text))
    return player
