"""Measure what OpenClaw 2026.9.6 tells a client about usage and the thinking level; runnable by hand.

    python3 tests/realgw/probe_usage.py [OUT.json] [--plain-only]

For owc's "usage line" after each reply and a thinking-level setting (``docs/measured/usage-thinking-2026.9.6.md``).
It starts the real Gateway offline on loopback with the project's fake model (``tests/realgw/gateway.py``,
``start_cuttable``; the model answers the canned text and reports ``usage`` ``{prompt 10, completion 10, total 20}``
for each request, ``tests/realgw/fake_model.py``) and drives it with raw protocol-4 clients
(``tests/rawclient.py``) that read all the time:

* ``A``: scopes read+write+admin (what owc asks), caps ``tool-events``, ``sessions.subscribe``d: it does the work;
* ``R``: ``operator.read`` only; ``W``: ``operator.write`` only (which scopes the two reads need);
* ``U``: like ``A`` plus the cap ``usage-refreshing`` (``usage.status``'s cold read answers at once).

Phase 1 (the offline config: ``fake/fake-model``, ``reasoning: false``):

* ``usage.status`` (``{}``, no params, an unknown param) on every connection;
* ``sessions.describe`` on a fresh ``agent:main:openwebui-<user>-<uuid>`` key before any run (also with
  ``includeDerivedTitles``/``includeLastMessage``, an unknown param, an unknown agent, an empty key, on ``R``/``W``),
  then after one and after two finished runs, a run with two model calls (``USE_TOOL``) and a failed run
  (``FAIL_RUN``);
* for every run: ``sessions.describe`` sent as soon as the chat terminal arrives (is the row already updated?) and the
  first ``sessions.changed`` for the key that names the run in ``lastRunId`` (how long after the terminal);
* ``chat.send`` with ``thinking`` = each level of the ladder, a synonym, an unknown word, and ``""``, each on a key of
  its own: the RPC's answer, the run's terminal, ``chat.history``'s last message, ``sessions.describe`` after;
* ``sessions.patch {key, thinkingLevel}`` with a supported, an unsupported, an unknown level, and ``null`` (and on
  ``W``), ``sessions.patch {key, responseUsage}`` and a run after it (does the Gateway's own usage line reach us?);
* a goal (``/goal start``, ``/goal``, ``/goal pause``, ``/goal clear``): the row's ``goal``;
* every ``sessions.changed`` frame ``A`` received, for the usage fields it carries.

Phases 2 and 3 (unless ``--plain-only``): a Gateway each whose fake model says ``reasoning: true`` (``PHASES``):
the ``sessions.describe`` thinking fields and the ``chat.send``/``sessions.patch`` thinking cases again.

The model is the project's fake model run in this process (``RecordingModel``: ``fake_model.Handler`` that first
keeps each request's top-level fields but ``messages``/``tools``), so the probe sees what a thinking level sends.

Writes everything (each request and answer, every frame each connection received, ``t`` in seconds since the
phase started) to OUT.json (default ``/tmp/usage_probe.json``) and prints a summary. Stops each Gateway and model by
pid at the end, whatever happened. Takes about eight minutes (three Gateway starts).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import signal
import sys
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: rawclient, realgw, tierlock

import trio  # noqa: E402

from owc.protocol import EventFrame, Response  # noqa: E402

from rawclient import RawClient, raw_client  # noqa: E402
from realgw import fake_model  # noqa: E402
from realgw.gateway import ensure_installed, start_cuttable  # noqa: E402

fake_model.print = lambda *args, **kwargs: None  # its one line a request: the recorder below keeps more

ADMIN = ("operator.read", "operator.write", "operator.admin")
TERMINAL = ("final", "aborted", "error")
RUN_TIMEOUT_S = 120
#: ``chat.send``'s ``thinking`` values tried: the ladder (``thinking.shared-*.mjs`` ``THINKING_LEVELS_HELP``), two
#: synonyms the normalizer maps (``none``, ``ON``), a word it does not know, and an empty string.
THINKING_VALUES = ("off", "minimal", "low", "medium", "high", "xhigh", "adaptive", "max", "ultra", "none", "ON",
                   "bogus", "")  # fmt: skip
PATCH_VALUES: tuple[Any, ...] = ("low", "off", "high", "xhigh", "bogus", None)
#: The offline config's model (``tests/realgw/gateway.py``), which the later phases change.
BASE_MODEL = {
    "id": "fake-model",
    "name": "Fake Model",
    "reasoning": False,
    "input": ["text"],
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 128000,
    "maxTokens": 4096,
}
#: Each phase: its name, its prefix for result names, and the model it declares (``None``: the offline config's).
#: ``reasoning``: ``reasoning: true`` and ``compat.supportsReasoningEffort`` (without it the OpenAI-completions
#: transport sends no ``reasoning_effort`` to a custom base URL, ``@openclaw/ai`` ``openai-completions-stream-*.mjs``);
#: ``efforts``: also ``compat.supportedReasoningEfforts`` with ``xhigh`` (which adds that level to the ladder).
PHASES: tuple[tuple[str, str, dict[str, Any] | None], ...] = (
    ("plain", "", None),
    ("reasoning", "R", {**BASE_MODEL, "reasoning": True, "compat": {"supportsReasoningEffort": True}}),
    ("efforts", "E", {**BASE_MODEL, "reasoning": True, "compat": {
        "supportsReasoningEffort": True, "supportedReasoningEfforts": ["minimal", "low", "medium", "high", "xhigh"]}}),
)  # fmt: skip


class RecordingHandler(fake_model.Handler):
    """The project's fake model, answering exactly as ``fake_model.py`` does, that first keeps what each request
    asked for (every top-level field but ``messages``/``tools``, and the last user words): what the Gateway sends
    the model for a thinking level."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length)
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {}
        user = ""
        for message in body.get("messages") or []:
            if message.get("role") == "user" and fake_model.INTERNAL_MARK not in fake_model._text(message):
                user = fake_model._text(message)
        self.server.requests.append({
            "t": round(time.monotonic() - self.server.t0, 3),
            "path": self.path,
            "fields": {k: v for k, v in body.items() if k not in ("messages", "tools")},
            "plan": fake_model.plan(body)[0],
            "user": user[:160],
        })  # fmt: skip
        self.rfile = io.BytesIO(data)
        super().do_POST()


class RecordingModel:
    """``RecordingHandler`` on a free loopback port, in a thread of this process (stopped by ``close``)."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), RecordingHandler)
        self.server.daemon_threads = True
        self.server.requests = []
        self.server.t0 = time.monotonic()
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Conn:
    """One connection that reads all the time (an unread socket would stall the Gateway's broadcasts), keeps every
    frame with its arrival time, and matches responses to requests."""

    def __init__(self, name: str, client: RawClient, t0: float, log: list[dict[str, Any]]) -> None:
        self.name, self.client, self.t0, self.log = name, client, t0, log
        self.events: list[tuple[float, EventFrame]] = []
        self.responses: dict[str, Response] = {}
        self.changed = trio.Event()

    async def read_forever(self) -> None:
        while True:
            frame = await self.client._read()
            t = round(time.monotonic() - self.t0, 3)
            self.log.append({"t": t, "conn": self.name, "frame": self.client.frames[-1]})
            if isinstance(frame, Response):
                self.responses[frame.id] = frame
            else:
                self.events.append((t, frame))
            self.changed.set()
            self.changed = trio.Event()

    async def request(self, method: str, params: Any = None) -> Response:
        req_id = await self.client.send(method, params)
        self.log.append({"t": round(time.monotonic() - self.t0, 3), "conn": self.name, "sent": {
            "method": method, "params": params, "id": req_id}})  # fmt: skip
        while req_id not in self.responses:
            await self.changed.wait()
        return self.responses.pop(req_id)

    async def wait_event(self, match, start: int = 0) -> tuple[int, EventFrame]:
        i = start
        while True:
            while i < len(self.events):
                if match(self.events[i][1]):
                    return i, self.events[i][1]
                i += 1
            await self.changed.wait()

    def since(self, start: int) -> list[EventFrame]:
        return [f for _, f in self.events[start:]]


def _end(run_id: str):
    return lambda f: f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") in TERMINAL


def _res(r: Response) -> dict[str, Any]:
    return {"ok": r.ok, "payload": r.payload, "error": None if r.error is None else {
        "code": r.error.code, "message": r.error.message, "details": r.error.details}}  # fmt: skip


def _key(tag: str) -> str:
    return f"agent:main:openwebui-probe{tag}-{uuid.uuid4()}"


#: The session row fields a usage line or a thinking setting could use (the rest of the row is kept in OUT.json).
USAGE_FIELDS = ("inputTokens", "outputTokens", "totalTokens", "totalTokensFresh", "contextTokens", "contextWindow",
                "contextWindows", "contextWindowDefault", "contextBudgetStatus", "estimatedCostUsd", "goal",
                "modelProvider", "model", "activeModelProvider", "activeModel", "thinkingLevel",
                "effectiveThinkingLevel", "thinkingLevels", "thinkingOptions", "thinkingDefault", "reasoningLevel",
                "responseUsage", "effectiveResponseUsage", "status", "lastRunError", "lastRunId", "runtimeMs",
                "startedAt", "endedAt", "updatedAt")  # fmt: skip


def usage_view(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(row, dict):
        return row
    return {k: row.get(k, "<absent>") for k in USAGE_FIELDS}


async def phase(url: str, token: str, out: dict[str, Any], p: str) -> None:
    reasoning = bool(p)  # the later phases only do the thinking cases
    t0 = time.monotonic()
    log: list[dict[str, Any]] = out.setdefault("log", [])
    res: dict[str, Any] = out.setdefault("results", {})
    async with (
        raw_client(url, token, instance_id="A", scopes=ADMIN) as ca,
        raw_client(url, token, instance_id="R", scopes=("operator.read",)) as cr,
        raw_client(url, token, instance_id="W", scopes=("operator.write",)) as cw,
        raw_client(url, token, instance_id="U", scopes=ADMIN, caps=("tool-events", "usage-refreshing")) as cu,
        trio.open_nursery() as nursery,
    ):
        conns = {n: Conn(n, c, t0, log) for n, c in (("A", ca), ("R", cr), ("W", cw), ("U", cu))}
        for c in conns.values():
            hello = c.client.frames[-1]["payload"]
            features = hello.get("features") or {}
            res[f"hello_{c.name}"] = {
                "auth_scopes": (hello.get("auth") or {}).get("scopes"),
                "methods": [m for m in features.get("methods", [])
                            if m.startswith(("usage.", "sessions.describe", "sessions.patch", "sessions.usage"))],
                "events": [e for e in features.get("events", []) if "session" in e or "usage" in e],
                "snapshot_keys": sorted((hello.get("snapshot") or {}).keys()),
                "snapshot_sessionDefaults": (hello.get("snapshot") or {}).get("sessionDefaults"),
            }  # fmt: skip
            nursery.start_soon(c.read_forever)
        a = conns["A"]
        res["subscribe_A"] = _res(await a.request("sessions.subscribe", {}))

        async def describe(name: str, params: Any, conn: Conn = a) -> dict[str, Any]:
            got = _res(await conn.request("sessions.describe", params))
            res[name] = got
            return got

        async def run(name: str, key: str, message: str, **extra: Any) -> dict[str, Any]:
            run_id = str(uuid.uuid4())
            mark = len(a.events)
            params = {"sessionKey": key, "message": message, "idempotencyKey": run_id, **extra}
            sent = _res(await a.request("chat.send", params))
            entry: dict[str, Any] = {"params": params, "send": sent}
            if sent["ok"]:
                with trio.move_on_after(RUN_TIMEOUT_S):
                    i_end, end = await a.wait_event(_end(run_id), mark)
                    entry["terminal"] = end.payload
                    t_end = a.events[i_end][0]
                    # What a client reading the row at once (on the chat terminal) gets.
                    at_final = _res(await a.request("sessions.describe", {"key": key}))
                    entry["describe_at_final"] = usage_view((at_final.get("payload") or {}).get("session"))
                    # The first sessions.changed for this key that carries this run's usage (lastRunId, a done status).
                    with trio.move_on_after(5):
                        i_use, use = await a.wait_event(
                            lambda f: (
                                f.event == "sessions.changed"
                                and f.payload.get("sessionKey") == key.lower()
                                and f.payload.get("lastRunId") == run_id
                                and f.payload.get("status") not in (None, "running")
                            ),
                            mark,
                        )
                        entry["usage_changed_after_final_s"] = round(a.events[i_use][0] - t_end, 3)
                        entry["usage_changed_index_vs_final"] = i_use - i_end
                        entry["usage_changed"] = {k: use.payload.get(k, "<absent>") for k in USAGE_FIELDS}
                await trio.sleep(0.5)  # the rest of the sessions.changed that follow a run's end
                entry["events"] = [{"event": f.event, "payload": f.payload} for f in a.since(mark)
                                   if f.event not in ("tick", "health")]  # fmt: skip
            hist = _res(await a.request("chat.history", {"sessionKey": key, "limit": 10}))
            msgs = (hist.get("payload") or {}).get("messages") or []
            entry["history_last"] = msgs[-1] if msgs else None
            entry["history_count"] = len(msgs)
            res[name] = entry
            return entry

        # -- usage.status ------------------------------------------------------------------------------------------
        if not reasoning:
            for c in conns.values():
                res[f"usage_status_{c.name}"] = _res(await c.request("usage.status", {}))
            res["usage_status_no_params"] = _res(await a.request("usage.status"))
            res["usage_status_extra_param"] = _res(await a.request("usage.status", {"bogus": 1}))

        # -- sessions.describe before any run ----------------------------------------------------------------------
        key = _key(f"{p}user")
        res[f"{p}key"] = key
        await describe(f"{p}describe_before", {"key": key})
        if not reasoning:
            await describe("describe_before_R", {"key": key}, conns["R"])
            await describe("describe_before_W", {"key": key}, conns["W"])
            await describe("describe_before_flags", {"key": key, "includeDerivedTitles": True,
                                                     "includeLastMessage": True})  # fmt: skip
            await describe("describe_extra_param", {"key": key, "bogus": 1})
            await describe("describe_sessionKey_param", {"sessionKey": key})
            await describe("describe_empty_key", {"key": ""})
            await describe("describe_unknown_agent", {"key": f"agent:nope:openwebui-x-{uuid.uuid4()}"})
            await describe("describe_unknown_agentId", {"key": key, "agentId": "nope"})
            await describe("describe_plain_key", {"key": f"openwebui-x-{uuid.uuid4()}"})
            await describe("describe_main", {"key": "main"})

        # -- one run, then describe; a second run, then describe --------------------------------------------------
        await run(f"{p}run1", key, "hello, first turn")
        await describe(f"{p}describe_after_run1", {"key": key})
        if not reasoning:
            await describe("describe_after_run1_R", {"key": key}, conns["R"])
            await describe("describe_after_run1_flags", {"key": key, "includeDerivedTitles": True,
                                                         "includeLastMessage": True})  # fmt: skip
            res["sessions_list_after_run1"] = _res(await a.request("sessions.list", {"limit": 5}))
            await run("run2", key, "hello, second turn")
            await describe("describe_after_run2", {"key": key})
            # Two model calls in one run (a tool call, then the answer): the row's per-run sums vs the last call.
            await run("run_tool", key, "USE_TOOL please")
            await describe("describe_after_tool_run", {"key": key})
            # A run that ends in an error terminal (the model refuses with HTTP 400).
            await run("run_fail", key, "FAIL_RUN please")
            await describe("describe_after_fail_run", {"key": key})
            res["usage_status_after_runs"] = _res(await a.request("usage.status", {}))
            res["usage_status_after_runs_U"] = _res(await conns["U"].request("usage.status", {}))

        # -- chat.send thinking ------------------------------------------------------------------------------------
        for value in THINKING_VALUES:
            tkey = _key(f"{p}think")
            await run(f"{p}think_{value or 'EMPTY'}", tkey, f"thinking {value!r}", thinking=value)
            await describe(f"{p}think_{value or 'EMPTY'}_describe", {"key": tkey})
        # Sticky? A second turn on the last supported-level key without ``thinking``.
        tkey = _key(f"{p}sticky")
        await run(f"{p}sticky_1", tkey, "first, with thinking", thinking="minimal")
        await describe(f"{p}sticky_1_describe", {"key": tkey})
        await run(f"{p}sticky_2", tkey, "second, without thinking")
        await describe(f"{p}sticky_2_describe", {"key": tkey})

        # -- sessions.patch thinkingLevel --------------------------------------------------------------------------
        pkey = _key(f"{p}patch")
        res[f"{p}patch_before_run"] = _res(await a.request("sessions.patch", {"key": pkey, "thinkingLevel": "low"}))
        await describe(f"{p}patch_before_run_describe", {"key": pkey})
        await run(f"{p}patch_run", pkey, "a turn so the session exists")
        for value in PATCH_VALUES:
            res[f"{p}patch_{value}"] = _res(await a.request("sessions.patch", {"key": pkey, "thinkingLevel": value}))
            await describe(f"{p}patch_{value}_describe", {"key": pkey})
        res[f"{p}patch_then_high"] = _res(await a.request("sessions.patch", {"key": pkey, "thinkingLevel": "high"}))
        await run(f"{p}patch_run_after_high", pkey, "a turn after the patch to high")
        if not reasoning:
            res["patch_W"] = _res(await conns["W"].request("sessions.patch", {"key": pkey, "thinkingLevel": "off"}))
            res["patch_responseUsage"] = _res(await a.request("sessions.patch", {"key": pkey,
                                                                                 "responseUsage": "full"}))  # fmt: skip
            await run("patch_run_after_responseUsage_full", pkey, "a turn with responseUsage full")
            res["patch_responseUsage_tokens"] = _res(
                await a.request("sessions.patch", {"key": pkey, "responseUsage": "tokens"})
            )
            await run("patch_run_after_responseUsage_tokens", pkey, "a turn with responseUsage tokens")
            await describe("patch_responseUsage_describe", {"key": pkey})

        if not reasoning:
            # -- a goal (the /goal command): the row's goal field ---------------------------------------------
            gkey = _key("goal")
            await run("goal_start", gkey, "/goal start probe objective")
            await trio.sleep(3.0)
            await describe("goal_describe_after_start", {"key": gkey})
            await run("goal_status", gkey, "/goal")
            await run("goal_pause", gkey, "/goal pause")
            await describe("goal_describe_after_pause", {"key": gkey})
            await run("goal_clear", gkey, "/goal clear")
            await describe("goal_describe_after_clear", {"key": gkey})
            res["goal_abort"] = _res(await a.request("chat.abort", {"sessionKey": gkey}))

        await trio.sleep(1.0)
        res[f"{p}sessions_changed_A"] = [{"t": t, "payload": f.payload} for t, f in a.events
                                         if f.event == "sessions.changed"]  # fmt: skip
        res[f"{p}events_seen"] = {n: sorted({f.event for _, f in c.events}) for n, c in conns.items()}
        nursery.cancel_scope.cancel()


def summary(out: dict[str, Any]) -> None:
    res = out.get("results", {})
    for name, value in res.items():
        if name.endswith("_describe") or name.lstrip("RE").startswith("describe"):
            if isinstance(value, dict) and value.get("ok"):
                row = (value.get("payload") or {}).get("session")
                view = usage_view(row)
                small = {
                    k: v
                    for k, v in (view or {}).items()
                    if k
                    in ("totalTokens", "contextTokens", "thinkingLevel", "effectiveThinkingLevel", "thinkingDefault")
                }
                print(f"{name}: session={'null' if row is None else small}")
            else:
                print(f"{name}: {json.dumps(value)[:300]}")
        elif isinstance(value, dict) and "send" in value:
            term = value.get("terminal") or {}
            last = value.get("history_last") or {}
            text = json.dumps(last.get("content"))[:160] if last else None
            print(f"{name}: send.ok={value['send']['ok']} err={value['send'].get('error')} "
                  f"terminal={term.get('state')} {term.get('errorMessage', '')!r} last={text}")  # fmt: skip
            at_final = value.get("describe_at_final") or {}
            changed = value.get("usage_changed") or {}
            print(f"    at final: in={at_final.get('inputTokens')} out={at_final.get('outputTokens')} "
                  f"total={at_final.get('totalTokens')} lastRunId==run: "
                  f"{at_final.get('lastRunId') == value['params']['idempotencyKey']}; usage sessions.changed "
                  f"{value.get('usage_changed_after_final_s')} s after the final: in={changed.get('inputTokens')} "
                  f"out={changed.get('outputTokens')} total={changed.get('totalTokens')}")  # fmt: skip
        elif name.startswith("usage_status") or name.lstrip("RE").startswith("patch"):
            print(f"{name}: {json.dumps(value)[:400]}")


#: The probe's own words in a model request's user text (the Gateway wraps them in a date prefix and, on a session's
#: first turn, a runtime suffix).
_WORDS = re.compile(r"(thinking '[^']*'|first, with thinking|second, without thinking|a turn[^\n|]*|hello, \w+ turn"
                    r"|USE_TOOL|FAIL_RUN|probe objective)")  # fmt: skip


def requests_summary(requests: list[dict[str, Any]]) -> None:
    """One line a model request: the fake model's plan, the probe's words, and every field but the constant ones."""
    for r in requests:
        fields = {
            k: v
            for k, v in r["fields"].items()
            if k not in ("model", "stream", "stream_options", "store", "tool_choice", "max_completion_tokens")
        }
        found = _WORDS.search(r["user"])
        words = found.group(0) if found else r["user"][:60]
        print(f"  model request: {r['plan']:<6} {words!r:<34} {json.dumps(fields)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default="/tmp/usage_probe.json")
    parser.add_argument("--plain-only", action="store_true", help="only the first phase (the offline config)")
    opts = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    install = ensure_installed()
    out: dict[str, Any] = {}
    tokens: list[str] = []

    def write() -> None:
        text = json.dumps(out, indent=1, default=str)
        for token in tokens:
            text = text.replace(token, "<token>")
        Path(opts.out).write_text(text)

    phases = PHASES[:1] if opts.plain_only else PHASES
    try:
        for name, prefix, declared in phases:
            model = RecordingModel()
            fake: dict[str, Any] = {"baseUrl": model.base_url}
            if declared:
                fake["models"] = [declared]
            try:
                gw = start_cuttable(install, config={"models": {"providers": {"fake": fake}}})
            except BaseException:
                model.close()
                raise
            tokens.append(gw.token)
            this: dict[str, Any] = {"gateway_home": str(gw.home)}
            out[name] = this
            try:
                trio.run(phase, gw.url, gw.token, this, prefix)
            except BaseException as exc:
                this["failed"] = repr(exc)
                raise
            finally:
                this["model_requests"] = model.requests
                gw.stop()
                model.close()
                write()
    finally:
        write()
        print(f"wrote {opts.out}")
    for name, _, _ in phases:
        print(f"== {name}")
        summary(out[name])
        requests_summary(out[name].get("model_requests") or [])


if __name__ == "__main__":
    main()
