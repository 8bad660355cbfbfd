"""Measure what OpenClaw 2026.9.6 gives a status view: tasks, sub-agents live, compaction (issue 29); runnable by hand.

    python3 tests/realgw/probe_status.py [OUT.json] [--cases subagent,compact_rpc,compact_cmd,compact_busy,goal]
                                         [--keep]

Findings: ``docs/measured/status-subagents-2026.9.6.md``.

It starts the real Gateway offline on loopback (the install, config and environment of ``tests/realgw/gateway.py``)
with **its own fake model**: this file run as ``probe_status.py --serve-model PORT`` (an OpenAI-compatible
``/v1/chat/completions`` scripted per request, ``model_plan``). The project's ``fake_model.py`` is not used and not
changed. Tool Search is on (the Gateway's default): a tool the Gateway does not offer directly (``sessions_spawn``)
is called through ``tool_call {id, args}``.

Connections (all ``gateway-client``/``backend``, shared token, unless said):

* ``A``: scopes read+write+admin, caps ``tool-events``, ``sessions.subscribe {}``: it starts every run (owc's).
* ``S``: the same, ``sessions.subscribe {}``, never starts a run (another owc connection / a status view).
* ``S0``: ``sessions.subscribe {}`` without the ``tool-events`` cap.
* ``M``: no ``sessions.subscribe``; ``sessions.messages.subscribe {key}`` on the parent, then on the child.
* ``M2``: no ``sessions.subscribe``; ``sessions.messages.subscribe {key}`` on the parent only.
* ``N``: nothing subscribed (the baseline).
* ``R``: ``operator.read`` only; ``W``: ``operator.read`` + ``operator.write`` (no admin).
* ``WC``: client id ``webchat``, mode ``cli``, scopes read+write+admin (the old Pipe's identity, inventory A1).

Cases:

* ``subagent``: the parent's model calls ``sessions_spawn {task, label}``; the child's model waits 1.5 s, calls
  ``exec`` (``sleep 2; ls``), then ``read notes.md``, then answers; the parent answers whatever the Gateway sends it
  back (the completion announce). Meanwhile ``A`` polls ``tasks.list {sessionKey: parent}`` every 0.5 s, ``M``
  subscribes to the child's messages as soon as the task names it; afterwards every ``tasks.*`` variant, the child's
  ``sessions.describe``, ``chat.history`` of both, ``sessions.list``.
* ``compact_rpc``: three turns, then ``sessions.compact {key}`` on ``W``, ``WC`` and ``A`` (and again, and with
  ``maxLines``): answers, events, the row and the transcript before and after.
* ``compact_cmd``: three turns, then ``chat.send {message:"/compact", deliver:false}`` as the old Action did.
* ``compact_busy``: a slow run, and during it ``sessions.compact`` then ``chat.send "/compact"``.
* ``goal``: ``/goal start`` then ``sessions.describe`` (the row's ``goal``).

Plus ``usage.status {}`` and the ``hello-ok.features`` events and methods that matter.

Writes every frame (long strings cut) and the results to OUT.json (default ``/tmp/status_probe.json``) and prints a
summary. Stops the Gateway (its process group) and the model by pid at the end, whatever happened, and removes the
Gateway's home folder (``--keep`` keeps it). Takes about two minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: rawclient, realgw, tierlock

# ---------------------------------------------------------------------------------------------------------------
# The fake model
#
# A step is ("text", text) or ("call", tool, args) or ("wait_call", seconds, tool, args) or ("slow", text, delay)
# (one word every ``delay`` seconds). The driver of a request is found from its messages (``model_plan``).

CHAT_TEXT = " ".join(
    f"Paragraph {i}: the probe talks about compaction, sub-agents and the status view so the transcript has weight."
    for i in range(12)
)
#: The task the parent gives its sub-agent (``CHILD:`` marks the child's own turns for ``model_plan``).
CHILD_TASK = "CHILD:work List the workspace, then read notes.md and report."
SCRIPTS: dict[str, list[tuple]] = {
    "spawn": [
        ("call", "sessions_spawn", {"task": CHILD_TASK, "label": "probe-child"}),
        ("text", "PARENT: the sub-agent is on it."),
    ],
    "child": [
        ("wait_call", 1.5, "exec", {"command": "sleep 2; ls"}),
        ("call", "read", {"path": "notes.md"}),
        ("text", "CHILD DONE: I listed the workspace and read notes.md."),
    ],
    "chat": [("text", CHAT_TEXT)],
    "slow": [("slow", " ".join(f"word{i}" for i in range(24)), 0.5)],
}
#: What the parent answers to a turn that is not a user's ``PROBE:`` (the sub-agent's completion announce).
ANNOUNCE_REPLY = "PARENT ANNOUNCE REPLY: the sub-agent's result arrived."
#: What a request without tools gets (the compaction summary call).
SUMMARY = "SUMMARY: the probe talked about compaction, sub-agents and the status view."
TRIGGER = re.compile(r"PROBE:([a-z_]+)")
INTERNAL_MARK = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
TOOL_CALL = "tool_call"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _called_spawn(message: dict[str, Any]) -> bool:
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        if fn.get("name") == "sessions_spawn" or "sessions_spawn" in str(fn.get("arguments", ""))[:60]:
            return True
    return False


def model_plan(body: dict[str, Any]) -> tuple[str, tuple, dict[str, Any]]:
    """(driver, step, info): the last real user message picks the script, the tool results after it the step."""
    messages = body.get("messages") or []
    info: dict[str, Any] = {"roles": [m.get("role") for m in messages]}
    last_user = ""
    tools_after = 0
    spawned = False
    for message in messages:
        role = message.get("role")
        if role == "user" and INTERNAL_MARK not in _text(message):
            last_user, tools_after = _text(message), 0
        elif role == "tool":
            tools_after += 1
        elif role == "assistant" and _called_spawn(message):
            spawned = True
    system = next((_text(m) for m in messages if m.get("role") in ("system", "developer")), "")
    info["last_user"] = last_user[-700:]
    info["last_user_head"] = last_user[:3000]
    info["system_head"] = system[:200]
    info["n_tools"] = len(body.get("tools") or [])
    found = TRIGGER.search(last_user)
    if not body.get("tools"):
        return "summary", ("text", SUMMARY), info
    if found and found.group(1) in SCRIPTS:
        driver = found.group(1)
    elif "CHILD:" in last_user and not spawned:
        driver = "child"
    else:
        return "announce", ("text", ANNOUNCE_REPLY), info
    script = SCRIPTS[driver]
    return driver, script[min(tools_after, len(script) - 1)], info


def serve_model(port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) or b"{}"
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": "unsupported"}})
                return
            body = json.loads(raw)
            offered = sorted(
                (t.get("function") or t).get("name") for t in body.get("tools") or [] if isinstance(t, dict)
            )
            driver, step, info = model_plan(body)
            print(json.dumps({"t": time.time(), "driver": driver, "step": step, "tools": offered, **info}), flush=True)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            base = {"id": f"chatcmpl-status{int(time.time() * 1000)}", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": body.get("model")}  # fmt: skip

            def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> None:
                choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
                self.wfile.write(b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n")
                self.wfile.flush()

            def call(tool: str, args: dict[str, Any]) -> None:
                name = tool
                if tool not in offered and TOOL_CALL in offered:  # deferred behind Tool Search
                    name, args = TOOL_CALL, {"id": tool, "args": args}
                c = {"index": 0, "id": f"call_{driver}_{secrets.token_hex(3)}", "type": "function",
                     "function": {"name": name, "arguments": ""}}  # fmt: skip
                chunk({"tool_calls": [c]})
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]})
                chunk({}, "tool_calls")

            try:
                chunk({"role": "assistant", "content": ""})
                if step[0] == "call":
                    call(step[1], step[2])
                elif step[0] == "wait_call":
                    time.sleep(step[1])
                    call(step[2], step[3])
                elif step[0] == "slow":
                    for i, word in enumerate(step[1].split(" ")):
                        time.sleep(step[2])
                        chunk({"content": word if i == 0 else " " + word})
                    chunk({}, "stop")
                else:
                    text = step[1]
                    for i in range(0, len(text), 40):
                        chunk({"content": text[i : i + 40]})
                        time.sleep(0.005)
                    chunk({}, "stop")
                chunk(None, usage={"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"status fake model on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


# ---------------------------------------------------------------------------------------------------------------
# The Gateway (gateway.py's install, offline config and environment; this file as the model)


def start_gateway():
    from realgw.gateway import CuttableGateway, _gateway_env, _offline_config, ensure_installed, free_port

    install = ensure_installed()
    home = Path(tempfile.mkdtemp(prefix="owc-realgw-status-"))
    for sub in ("logs", "state", "home", "workspace", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    (home / "workspace" / "notes.md").write_text("# Notes\n\nThe sub-agent reads this file.\n")
    port, model_port = free_port(), free_port()
    token = secrets.token_hex(16)
    body = _offline_config(home, port, model_port, token)
    config_path = home / "state" / "openclaw.json"
    config_path.write_text(json.dumps(body, indent=2))
    config_path.chmod(0o600)
    env = _gateway_env(install, home, config_path)
    model_log = open(home / "logs" / "model.out", "ab")
    model = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve-model", str(model_port)],
        stdout=model_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    gw = CuttableGateway(install=install, home=home, port=port, token=token, env=env, model=model)
    try:
        gw.launch()
        gw.wait_ready()
    except BaseException:
        gw.stop()
        raise
    return gw


# ---------------------------------------------------------------------------------------------------------------
# The client side

ADMIN = ("operator.read", "operator.write", "operator.admin")
TERMINAL = ("final", "aborted", "error")
CASE_TIMEOUT_S = 180
NOISE = ("health", "tick", "presence", "cron", "update.available")
CUT = 400


def cut(value: Any, limit: int = CUT) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:160]}…<{len(value)} chars sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]}>"
    if isinstance(value, list):
        return [cut(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: cut(v, limit) for k, v in value.items()}
    return value


def brief(event: str, p: dict[str, Any]) -> dict[str, Any]:
    """The fields of an event that say what it is about (the whole payload is in the log)."""
    data = p.get("data") if isinstance(p.get("data"), dict) else {}
    msg = p.get("message") if isinstance(p.get("message"), dict) else {}
    out = {
        "event": event,
        "key": p.get("sessionKey") or p.get("key"),
        "runId": p.get("runId"),
        "stream": p.get("stream"),
        "phase": data.get("phase") or p.get("phase"),
        "tool": data.get("name"),
        "state": p.get("state"),
        "reason": p.get("reason"),
        "operation": p.get("operation"),
        "role": msg.get("role"),
        "text": cut(_text(msg) or data.get("text") or data.get("delta") or "", 80) or None,
        "status": p.get("status") if isinstance(p.get("status"), str) else None,
        "task": (p.get("task") or {}).get("status") if isinstance(p.get("task"), dict) else None,
    }
    return {k: v for k, v in out.items() if v not in (None, "")}


def _res(r) -> dict[str, Any]:
    return {"ok": r.ok, "payload": r.payload, "error": None if r.error is None else {
        "code": r.error.code, "message": r.error.message, "details": r.error.details}}  # fmt: skip


class Conn:
    """One connection that reads all the time, keeps every event with its arrival time, matches responses."""

    def __init__(self, name: str, client, t0: float, log: list[dict[str, Any]]) -> None:
        import trio

        self.name, self.client, self.t0, self.log = name, client, t0, log
        self.events: list[tuple[float, Any]] = []
        self.responses: dict[str, Any] = {}
        self.changed = trio.Event()

    async def read_forever(self) -> None:
        import trio

        from owc.protocol import Response

        while True:
            frame = await self.client._read()
            t = round(time.monotonic() - self.t0, 3)
            raw = self.client.frames[-1]
            self.client.frames.clear()
            if isinstance(frame, Response):
                self.responses[frame.id] = frame
            else:
                if frame.event not in NOISE:
                    self.log.append({"t": t, "conn": self.name, "frame": cut(raw, 1500)})
                self.events.append((t, frame))
            self.changed.set()
            self.changed = trio.Event()

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        req_id = await self.client.send(method, params)
        self.log.append({"t": round(time.monotonic() - self.t0, 3), "conn": self.name, "sent": {
            "method": method, "params": params}})  # fmt: skip
        while req_id not in self.responses:
            await self.changed.wait()
        got = _res(self.responses.pop(req_id))
        self.log.append({"t": round(time.monotonic() - self.t0, 3), "conn": self.name, "answer": cut(got, 3000)})
        return got

    async def wait_event(self, match, start: int = 0, timeout: float = 120) -> tuple[int, Any]:
        import trio

        i = start
        with trio.fail_after(timeout):
            while True:
                while i < len(self.events):
                    if match(self.events[i][1]):
                        return i, self.events[i][1]
                    i += 1
                await self.changed.wait()

    def timeline(self, start: int, keys: set[str] | None, t_ref: float) -> list[dict[str, Any]]:
        out = []
        for t, f in self.events[start:]:
            if f.event in NOISE:
                continue
            b = brief(f.event, f.payload if isinstance(f.payload, dict) else {})
            if keys is not None and b.get("key") not in keys and not f.event.startswith("task"):
                continue
            out.append({"t": round(t - t_ref, 3), **b})
        return out


def ended(run_id: str):
    """A match for the run's ``chat`` terminal."""
    return lambda f: f.event == "chat" and f.payload.get("runId") == run_id and f.payload.get("state") in TERMINAL


def _key(tag: str) -> str:
    return f"agent:main:openwebui-status-{tag}-{uuid.uuid4().hex[:8]}"


#: The row fields a status view could use.
ROW_FIELDS = ("key", "status", "modelProvider", "model", "contextTokens", "totalTokens", "totalTokensFresh",
              "inputTokens", "outputTokens", "goal", "compactionCount", "compactionCheckpointCount",
              "latestCompactionCheckpoint", "contextBudgetStatus", "lastRunId", "spawnedBy", "parentSessionKey",
              "spawnDepth", "subagentRole", "label", "displayName", "kind", "isBackground", "startedAt", "endedAt",
              "runtimeMs", "abortedLastRun", "lastRunError")  # fmt: skip


def row_view(res: dict[str, Any]) -> Any:
    row = ((res.get("payload") or {}).get("session")) if res.get("ok") else None
    if not isinstance(row, dict):
        return res if not res.get("ok") else row
    view = {k: row[k] for k in ROW_FIELDS if k in row}
    view["_other_keys"] = sorted(k for k in row if k not in ROW_FIELDS)
    if isinstance(view.get("contextBudgetStatus"), dict):
        cbs = view["contextBudgetStatus"]
        view["contextBudgetStatus"] = {k: cbs.get(k) for k in ("estimatedPromptTokens", "shouldCompact", "route")}
    return view


async def probe(gw, out: dict[str, Any], only: list[str]) -> None:
    import trio

    from rawclient import Refused, raw_client

    t0 = time.monotonic()
    log: list[dict[str, Any]] = out.setdefault("log", [])
    res: dict[str, Any] = out.setdefault("results", {})

    async with (
        raw_client(gw.url, gw.token, instance_id="A", scopes=ADMIN) as ca,
        raw_client(gw.url, gw.token, instance_id="S", scopes=ADMIN) as cs,
        raw_client(gw.url, gw.token, instance_id="S0", scopes=ADMIN, caps=()) as cs0,
        raw_client(gw.url, gw.token, instance_id="M", scopes=ADMIN) as cm,
        raw_client(gw.url, gw.token, instance_id="M2", scopes=ADMIN) as cm2,
        raw_client(gw.url, gw.token, instance_id="N", scopes=ADMIN) as cn,
        raw_client(gw.url, gw.token, instance_id="R", scopes=("operator.read",)) as cr,
        raw_client(gw.url, gw.token, instance_id="W", scopes=("operator.read", "operator.write")) as cw,
        trio.open_nursery() as nursery,
    ):
        clients = (("A", ca), ("S", cs), ("S0", cs0), ("M", cm), ("M2", cm2), ("N", cn), ("R", cr), ("W", cw))
        conns = {name: Conn(name, c, t0, log) for name, c in clients}
        hello = ca.frames[-1]["payload"]
        feats = hello.get("features") or {}
        res["hello_events"] = sorted(feats.get("events") or [])
        res["hello_methods"] = sorted(m for m in feats.get("methods") or []
                                      if re.search(r"^(tasks|subagent|usage)\.|compact|sessions\.(describe|list|"
                                                   r"subscribe|messages|get|preview)|goal", m))  # fmt: skip
        res["hello_scopes"] = {n: (c.client.frames[-1]["payload"].get("auth") or {}).get("scopes")
                               for n, c in conns.items()}  # fmt: skip
        for c in conns.values():
            c.client.frames.clear()
            nursery.start_soon(c.read_forever)
        a, s, s0, m, m2, r, w = (conns[x] for x in ("A", "S", "S0", "M", "M2", "R", "W"))
        for c in (a, s, s0):
            res[f"subscribe_{c.name}"] = await c.request("sessions.subscribe", {})
        res["usage_status"] = await a.request("usage.status", {})

        # The old Pipe's identity (client id "webchat", mode "cli"): for sessions.compact only.
        wc_holder: dict[str, Any] = {}

        async def webchat_conn(task_status=trio.TASK_STATUS_IGNORED) -> None:
            try:
                async with raw_client(gw.url, gw.token, client_id="webchat", mode="cli", instance_id="WC",
                                      scopes=ADMIN) as cwc:  # fmt: skip
                    res["hello_WC"] = {"auth": cwc.frames[-1]["payload"].get("auth")}
                    cwc.frames.clear()
                    conn = Conn("WC", cwc, t0, log)
                    wc_holder["conn"] = conn
                    task_status.started()
                    await conn.read_forever()
            except Refused as exc:
                res["hello_WC"] = {"refused": str(exc), "error": _res(exc.response)["error"]}
                task_status.started()

        await nursery.start(webchat_conn)

        async def run(conn: Conn, key: str, message: str, **extra: Any) -> dict[str, Any]:
            run_id = str(uuid.uuid4())
            mark = len(conn.events)
            t_send = time.monotonic() - t0
            sent = await conn.request("chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id,
                                                    **extra})  # fmt: skip
            got: dict[str, Any] = {"runId": run_id, "send": sent, "t_send": round(t_send, 3)}
            if not sent["ok"]:
                return got
            _, end = await conn.wait_event(lambda f: f.event == "chat" and f.payload.get("runId") == run_id
                                           and f.payload.get("state") in TERMINAL, mark)  # fmt: skip
            got["end"] = cut(end.payload, 1500)
            got["t_end"] = round(time.monotonic() - t0 - t_send, 3)
            return got

        async def describe(key: str, conn: Conn = a) -> dict[str, Any]:
            return await conn.request("sessions.describe", {"key": key})

        async def history(key: str, limit: int = 50) -> list[Any]:
            h = await a.request("chat.history", {"sessionKey": key, "limit": limit})
            msgs = (h.get("payload") or {}).get("messages") or []
            return [cut({"role": x.get("role"), "content": x.get("content"), "provenance": x.get("provenance"),
                         "__openclaw": x.get("__openclaw"), "model": x.get("model"),
                         "provider": x.get("provider")}, 500) for x in msgs] if h["ok"] else [h]  # fmt: skip

        # -----------------------------------------------------------------------------------------------------
        async def case_subagent() -> None:
            rr: dict[str, Any] = {}
            res["subagent"] = rr
            parent = _key("parent")
            rr["parent"] = parent
            rr["msub_parent"] = await m.request("sessions.messages.subscribe", {"key": parent})
            rr["msub_parent_M2"] = await m2.request("sessions.messages.subscribe", {"key": parent})
            marks = {c.name: len(c.events) for c in conns.values()}
            t_send = time.monotonic() - t0
            run_id = str(uuid.uuid4())
            rr["send"] = await a.request("chat.send", {"sessionKey": parent, "message": "PROBE:spawn please",
                                                       "idempotencyKey": run_id})  # fmt: skip
            rr["runId"] = run_id
            polls: list[dict[str, Any]] = []
            rr["polls"] = polls
            child = None
            task_id = None
            t_terminal = None
            deadline = time.monotonic() + 120
            last_shape = None
            while time.monotonic() < deadline:
                tl = await a.request("tasks.list", {"sessionKey": parent})
                tasks = (tl.get("payload") or {}).get("tasks") or []
                shape = [{k: tk.get(k) for k in ("id", "status", "title", "childSessionKey", "lastToolName",
                                                 "toolUseCount", "lastActivity", "progressSummary",
                                                 "terminalSummary", "deliveryStatus", "execution")}
                         for tk in tasks]  # fmt: skip
                now = round(time.monotonic() - t0 - t_send, 3)
                if shape != last_shape:
                    polls.append({"t": now, "tasks": cut(tasks, 600) if tl["ok"] else tl})
                    last_shape = shape
                for tk in tasks:
                    if tk.get("childSessionKey") and child is None:
                        child, task_id = tk["childSessionKey"], tk["id"]
                        rr["child"], rr["taskId"], rr["t_child_seen"] = child, task_id, now
                        rr["msub_child"] = await m.request("sessions.messages.subscribe", {"key": child})
                        rr["msub_child_t"] = round(time.monotonic() - t0 - t_send, 3)
                        rr["tasks_get_running"] = await a.request("tasks.get", {"taskId": task_id})
                        rr["describe_child_running"] = await describe(child)
                        rr["tasks_list_running_filter"] = await a.request(
                            "tasks.list", {"sessionKey": parent, "status": ["running", "queued"], "limit": 50}
                        )
                    if tk.get("id") == task_id and tk.get("status") not in ("running", "queued") and not t_terminal:
                        t_terminal = time.monotonic()
                        rr["t_task_terminal_seen"] = now
                if t_terminal:
                    finals = [f for _, f in a.events[marks["A"]:] if f.event == "chat" and
                              f.payload.get("state") in TERMINAL and f.payload.get("runId") != run_id and
                              f.payload.get("sessionKey") == parent]  # fmt: skip
                    if (finals and time.monotonic() - t_terminal > 4) or time.monotonic() - t_terminal > 40:
                        break
                await trio.sleep(0.5)
            await trio.sleep(1.0)
            # When did the parent's tool call start on A (the spawn)?
            t_spawn = None
            for t, f in a.events[marks["A"] :]:
                d = f.payload.get("data") or {} if isinstance(f.payload, dict) else {}
                if f.event == "agent" and d.get("phase") == "start" and d.get("name") in ("sessions_spawn",
                                                                                           "tool_call"):  # fmt: skip
                    t_spawn = t
                    break
            t_ref = t_spawn if t_spawn is not None else t_send
            rr["t_spawn_after_send"] = None if t_spawn is None else round(t_spawn - t_send, 3)
            keys = {parent, child} if child else {parent}
            for c in conns.values():
                rr[f"timeline_{c.name}"] = c.timeline(marks[c.name], None, t_ref)
            if "conn" in wc_holder:
                rr["timeline_WC"] = wc_holder["conn"].timeline(0, keys, t_ref)
            if not child:
                return
            rr["tasks_get"] = await a.request("tasks.get", {"taskId": task_id})
            rr["tasks_get_R"] = await r.request("tasks.get", {"taskId": task_id})
            rr["tasks_get_unknown"] = await a.request("tasks.get", {"taskId": "nope"})
            rr["tasks_list_all"] = await a.request("tasks.list", {})
            rr["tasks_list_R"] = await r.request("tasks.list", {"sessionKey": parent})
            rr["tasks_list_parent"] = await a.request("tasks.list", {"sessionKey": parent})
            rr["tasks_list_child"] = await a.request("tasks.list", {"sessionKey": child, "limit": 25})
            rr["tasks_list_parent_active"] = await a.request(
                "tasks.list", {"sessionKey": parent, "status": ["running", "queued"], "limit": 50}
            )
            rr["tasks_list_parent_completed"] = await a.request("tasks.list", {"sessionKey": parent,
                                                                               "status": "completed"})  # fmt: skip
            rr["tasks_list_other_key"] = await a.request("tasks.list", {"sessionKey": _key("other")})
            rr["tasks_list_agent"] = await a.request("tasks.list", {"agentId": "main", "limit": 5})
            rr["tasks_list_bad_status"] = await a.request("tasks.list", {"status": "succeeded"})
            rr["tasks_list_sessionKey_typo"] = await a.request("tasks.list", {"key": parent})
            rr["tasks_history"] = cut(await a.request("tasks.history", {"taskId": task_id, "limit": 20}), 600)
            rr["describe_child"] = await describe(child)
            rr["describe_parent"] = await describe(parent)
            rr["history_child"] = await history(child)
            rr["history_parent"] = await history(parent)
            sl = await a.request("sessions.list", {})
            rows = (sl.get("payload") or {}).get("sessions") or []
            rr["sessions_list_rows"] = cut([x for x in rows if x.get("key") in (child, parent)], 1500)
            rr["sessions_list_ok"] = sl["ok"] if sl["ok"] else sl
            rr["preview_child"] = cut(await a.request("sessions.preview", {"keys": [child]}), 1500)

        # -----------------------------------------------------------------------------------------------------
        async def turns(key: str, count: int) -> list[Any]:
            return [await run(a, key, f"PROBE:chat turn {i}") for i in range(count)]

        async def compact_events(mark_a: int, mark_s: int, key: str, t_ref: float) -> dict[str, Any]:
            await trio.sleep(3.0)
            return {"A": a.timeline(mark_a, {key}, t_ref), "S": s.timeline(mark_s, {key}, t_ref)}

        async def case_compact_rpc() -> None:
            rr: dict[str, Any] = {}
            res["compact_rpc"] = rr
            key = _key("crpc")
            rr["key"] = key
            rr["compact_before_any"] = await a.request("sessions.compact", {"key": key})
            rr["turns"] = cut(await turns(key, 3), 300)
            rr["row_before"] = row_view(await describe(key))
            rr["history_before_n"] = len(await history(key, 200))
            rr["compact_W"] = await w.request("sessions.compact", {"key": key})
            if "conn" in wc_holder:
                rr["compact_WC"] = await wc_holder["conn"].request("sessions.compact", {"key": key})
            ma, ms = len(a.events), len(s.events)
            t_req = time.monotonic() - t0
            rr["compact_A"] = await a.request("sessions.compact", {"key": key})
            rr["compact_A_seconds"] = round(time.monotonic() - t0 - t_req, 3)
            rr["events"] = await compact_events(ma, ms, key, t_req)
            rr["row_after"] = row_view(await describe(key))
            rr["history_after"] = await history(key, 200)
            rr["compact_A_again"] = await a.request("sessions.compact", {"key": key})
            rr["turn_after"] = cut(await run(a, key, "PROBE:chat after compaction"), 300)
            rr["row_after_turn"] = row_view(await describe(key))
            ma = len(a.events)
            t_req = time.monotonic() - t0
            rr["compact_maxLines"] = await a.request("sessions.compact", {"key": key, "maxLines": 2})
            rr["events_maxLines"] = {"A": a.timeline(ma, {key}, t_req)}
            await trio.sleep(1.0)
            rr["events_maxLines"] = {"A": a.timeline(ma, {key}, t_req)}
            rr["row_after_maxLines"] = row_view(await describe(key))
            rr["history_after_maxLines"] = await history(key, 200)

        async def case_compact_cmd() -> None:
            rr: dict[str, Any] = {}
            res["compact_cmd"] = rr
            key = _key("ccmd")
            rr["key"] = key
            rr["turns"] = cut(await turns(key, 3), 300)
            rr["row_before"] = row_view(await describe(key))
            ma, ms = len(a.events), len(s.events)
            t_req = time.monotonic() - t0
            rr["run"] = await run(a, key, "/compact", deliver=False)
            rr["events"] = await compact_events(ma, ms, key, t_req)
            rr["row_after"] = row_view(await describe(key))
            rr["history_after"] = await history(key, 200)
            # On a session that has nothing yet (a new chat), and a second time (already compacted).
            rr["run_again"] = cut(await run(a, key, "/compact", deliver=False), 1500)
            fresh = _key("ccmd-new")
            rr["run_fresh"] = cut(await run(a, fresh, "/compact", deliver=False), 1500)
            rr["row_fresh"] = row_view(await describe(fresh))

        async def case_compact_busy() -> None:
            rr: dict[str, Any] = {}
            res["compact_busy"] = rr
            for label, how in (("rpc", "rpc"), ("cmd", "cmd")):
                key = _key(f"cbusy-{label}")
                sub: dict[str, Any] = {"key": key}
                rr[label] = sub
                sub["turns"] = cut(await turns(key, 2), 300)
                ma = len(a.events)
                t_req = time.monotonic() - t0
                slow_id = str(uuid.uuid4())
                sub["slow_send"] = await a.request("chat.send", {"sessionKey": key, "message": "PROBE:slow now",
                                                                 "idempotencyKey": slow_id})  # fmt: skip
                await trio.sleep(2.0)
                sub["row_during"] = row_view(await describe(key))
                if how == "rpc":
                    sub["compact"] = await a.request("sessions.compact", {"key": key})
                else:
                    cmd_id = str(uuid.uuid4())
                    sub["compact_send"] = await a.request("chat.send", {"sessionKey": key, "message": "/compact",
                                                                        "deliver": False,
                                                                        "idempotencyKey": cmd_id})  # fmt: skip
                    sub["cmd_runId"] = cmd_id
                    try:
                        _, end = await a.wait_event(ended(cmd_id), ma, 60)
                        sub["cmd_end"] = cut(end.payload, 1500)
                    except trio.TooSlowError:
                        sub["cmd_end"] = "no terminal in 60 s"
                try:
                    _, end = await a.wait_event(ended(slow_id), ma, 60)
                    sub["slow_end"] = cut(end.payload, 600)
                except trio.TooSlowError:
                    sub["slow_end"] = "no terminal in 60 s"
                await trio.sleep(2.0)
                sub["events"] = a.timeline(ma, {key}, t_req)
                sub["row_after"] = row_view(await describe(key))
                sub["history_after"] = await history(key, 200)

        async def case_goal() -> None:
            rr: dict[str, Any] = {}
            res["goal"] = rr
            key = _key("goal")
            rr["turn"] = cut(await run(a, key, "PROBE:chat hello"), 300)
            rr["goal_start"] = cut(await run(a, key, "/goal start probe objective"), 800)
            rr["row"] = row_view(await describe(key))
            rr["goal_show"] = cut(await run(a, key, "/goal"), 800)

        cases = {"subagent": case_subagent, "compact_rpc": case_compact_rpc, "compact_cmd": case_compact_cmd,
                 "compact_busy": case_compact_busy, "goal": case_goal}  # fmt: skip
        for name in only or list(cases):
            try:
                with trio.fail_after(CASE_TIMEOUT_S):
                    await cases[name]()
            except Exception as exc:
                res.setdefault(name, {})["failed"] = repr(exc)
                print(f"case {name} failed: {exc!r}", flush=True)
            print(f"case {name} done", flush=True)
        nursery.cancel_scope.cancel()


def summary(out: dict[str, Any]) -> str:
    lines = []
    res = out.get("results", {})
    sa = res.get("subagent") or {}
    if sa:
        lines.append(
            f"subagent: child={sa.get('child')} task={sa.get('taskId')} t_spawn={sa.get('t_spawn_after_send')}"
        )
        for name in ("A", "S", "S0", "M", "M2", "N"):
            tl = sa.get(f"timeline_{name}") or []
            child_ev = [e for e in tl if e.get("key") == sa.get("child")]
            kinds = sorted({f"{e['event']}/{e.get('stream', '')}" for e in child_ev})
            lines.append(f"  {name}: {len(tl)} events, {len(child_ev)} for the child: {kinds}")
    for case in ("compact_rpc", "compact_cmd"):
        r = res.get(case) or {}
        if r:
            before, after = r.get("row_before") or {}, r.get("row_after") or {}
            tokens = f"totalTokens {before.get('totalTokens')} -> {after.get('totalTokens')}"
            count = f"compactionCount {before.get('compactionCount')} -> {after.get('compactionCount')}"
            lines.append(f"{case}: {tokens}, {count}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default="/tmp/status_probe.json")
    parser.add_argument("--cases", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the Gateway's home folder (logs, state)")
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve_model:
        serve_model(opts.serve_model)
        return
    import trio

    only = [c for c in opts.cases.split(",") if c]
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    gw = start_gateway()
    out: dict[str, Any] = {"gateway_home": str(gw.home)}
    try:
        trio.run(probe, gw, out, only)
    finally:
        model_lines = (gw.home / "logs" / "model.out").read_text(errors="replace").splitlines()
        out["model_log"] = [cut(json.loads(line), 3200) if line.startswith("{") else line for line in model_lines]
        glog = gw.log_tail(100000).splitlines()
        keep = re.compile(r"subagent|spawn|task|compact|announce", re.I)
        out["gateway_log_matches"] = [line for line in glog if keep.search(line)][-200:]
        out["gateway_log_tail"] = glog[-60:]
        gw.stop()
        if not opts.keep:
            shutil.rmtree(gw.home, ignore_errors=True)
        Path(opts.out).write_text(json.dumps(out, indent=1, default=str).replace(gw.token, "<token>"))
        print(summary(out))
        print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
