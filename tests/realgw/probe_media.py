"""Measure how OpenClaw 2026.9.6 hands files the agent makes to an operator client (issue 28); runnable by hand.

    python3 tests/realgw/probe_media.py [OUT.json] [--cases a,b,...] [--keep] [--direct] [--text-model]
                                        [--no-image-provider]

Findings: ``docs/measured/media-2026.9.6.md``.

It starts the real Gateway offline on loopback (the install, config and environment of ``tests/realgw/gateway.py``)
with **its own fake model**: this file run as ``probe_media.py --serve-model PORT`` (an OpenAI-compatible
``/v1/chat/completions``, plus ``/v1/images/generations`` so the Gateway's own ``image_generate`` tool has an
offline OpenAI image provider: ``models.providers.openai`` pointed at it, and
``OPENCLAW_QA_ALLOW_LOCAL_IMAGE_PROVIDER=1``, without which the Gateway refuses a loopback image endpoint). The
project's ``fake_model.py`` is not used and not changed. The fake model is a vision model unless ``--text-model``.

Before the Gateway starts, the probe writes test files into the agent's workspace (``<home>/workspace``): a small
PNG, a PDF, Markdown, CSV, HTML, SVG, random bytes, a WAV, a 5000 px wide PNG, PNGs of 1 and 13 MiB, PDFs of 4 and
6 MiB, and one PNG outside the workspace (``WORKSPACE_FILES``, ``LARGE_FILES``).

Each case sends one ``chat.send`` (``PROBE:<case>`` in the message; the model's script for each case is ``SCRIPTS``)
on a session key of its own, waits for the run's ``chat`` terminal, reads ``chat.history`` at once and then every
100 ms for a few seconds (when do the file blocks land?), then reads back everything a client could use:
``artifacts.list`` (by key, key+run, run, ``type:"image"``, ``messageRole``), ``artifacts.get`` /
``artifacts.download`` (plain, ``transport:"http"``, another key, the read-only connection) for each artifact, HTTP
GETs of every URL offered (with the ticket, without it, with ``Authorization: Bearer <token>``, HEAD, a range, the
thumbnail), the Control UI's ``/__openclaw__/assistant-media`` route, ``sessions.files.*`` and ``agents.workspace.*``,
and the files under the Gateway's state ``media/`` folder. At the end: a ticket URL fetched after the connection that
asked for it closed.

Connection ``A``: scopes read+write+admin (what owc asks today), caps ``tool-events``, ``sessions.subscribe``.
Connection ``R``: read only (are the read RPCs enough?).

Writes every frame (base64 and long strings cut, their length and sha256 kept), the probe's requests and results,
the model's log and the Gateway's log lines about media to OUT.json (default ``/tmp/media_probe.json``), and prints a
short summary. Stops the Gateway (its process group) and the model by pid at the end, whatever happened, and removes
the Gateway's home folder (``--keep`` keeps it). Takes about two and a half minutes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: rawclient, realgw, tierlock

# ---------------------------------------------------------------------------------------------------------------
# Test files


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 30, 30), pad: int = 0) -> bytes:
    """A valid RGB PNG; ``pad`` bytes of an ancillary ``tEXt`` chunk make it as large as wanted."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    body += chunk(b"IDAT", zlib.compress(row * height, 9))
    if pad:
        body += chunk(b"tEXt", b"Comment\x00" + b"x" * pad)
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
)

#: Files put in the workspace before the Gateway starts (relative path -> bytes).
WORKSPACE_FILES: dict[str, bytes] = {
    "chart.png": png(64, 48),
    "photo.jpg.png": png(32, 32, (30, 200, 30)),
    "report.pdf": PDF,
    "notes.md": b"# Notes\n\nA Markdown document the agent made.\n",
    "data.csv": b"a,b\n1,2\n3,4\n",
    "page.html": b"<!doctype html><html><body><h1>Hello</h1><script>alert(1)</script></body></html>\n",
    "logo.svg": b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10"/></svg>\n',
    "wide.png": png(5000, 10, (30, 30, 200)),
    "big.png": png(16, 16, pad=13 * 1024 * 1024),
    "sub dir/space name.png": png(20, 20, (100, 100, 0)),
    "blob.bin": os.urandom(1000),
    "tone.wav": b"RIFF"
    + struct.pack("<I", 36 + 800)
    + b"WAVEfmt "
    + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8)
    + b"data"
    + struct.pack("<I", 800)
    + bytes(800),
}


def noise_png(width: int, height: int) -> bytes:
    """A PNG of random pixels (does not compress: its size is about width * height * 3)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))  # fmt: skip


#: Large files, made once at start (not kept in memory as module constants: ``--serve-model`` does not need them).
LARGE_FILES = {
    "mid.png": lambda: noise_png(600, 600),  # ~1 MiB: over sessions.files' preview cap, under agents.workspace's
    "noise.png": lambda: noise_png(2200, 2100),  # ~13.2 MiB of noise: over the 12 MiB managed image cap
    "doc4.pdf": lambda: PDF + b"%" + b"x" * (4 * 1024 * 1024) + b"\n%%EOF\n",  # 4 MiB document
    "doc6.pdf": lambda: PDF + b"%" + b"x" * (6 * 1024 * 1024) + b"\n%%EOF\n",  # 6 MiB document
}
#: The image the fake image provider returns (base64 in the OpenAI ``b64_json`` shape).
GENERATED_PNG = png(40, 40, (250, 160, 0))

# ---------------------------------------------------------------------------------------------------------------
# The fake model: each case's script, by the number of tool results that followed the user's words.
#
# A step is ("text", text) or ("call", tool, args) or ("text_call", text, tool, args) (text, then a tool call in
# the same answer: the text becomes commentary) or ("echo", prefix) (answer prefix + the last tool result's text).
# ``{outside}`` in a step is replaced with the absolute path of the PNG outside the workspace, ``{ws}`` with the
# workspace path.

SCRIPTS: dict[str, list[tuple]] = {
    # (a) MEDIA: lines in the final answer
    "media_png": [("text", "Here is the chart.\n\nMEDIA:chart.png")],
    "media_abs": [("text", "Here is the chart.\n\nMEDIA:{ws}/chart.png")],
    "media_docs": [("text", "Three documents.\n\nMEDIA:report.pdf\nMEDIA:notes.md\nMEDIA:data.csv")],
    "media_mixed": [("text", "Before the image.\n\nMEDIA:chart.png\n\nBetween.\n\nMEDIA:report.pdf\n\nAfter.")],
    "media_odd": [
        ("text", 'Odd ones.\n\nMEDIA:page.html\nMEDIA:logo.svg\nMEDIA:blob.bin\nMEDIA:"sub dir/space name.png"')
    ],
    "media_bad": [
        ("text", "Bad ones.\n\nMEDIA:../../etc/passwd\nMEDIA:/etc/hostname\nMEDIA:missing.png\nMEDIA:{outside}")
    ],
    "media_limits": [("text", "Large ones.\n\nMEDIA:wide.png\nMEDIA:big.png")],
    "media_alone": [("text", "MEDIA:chart.png")],
    "media_only_bad": [("text", "Only a bad one.\n\nMEDIA:../../etc/passwd")],
    "media_dup": [("text", "Twice.\n\nMEDIA:chart.png\nMEDIA:chart.png\nMEDIA:./chart.png")],
    "media_big": [("text", "Big ones.\n\nMEDIA:noise.png\nMEDIA:doc4.pdf\nMEDIA:doc6.pdf\nMEDIA:mid.png")],
    "media_audio": [("text", "A sound.\n\nMEDIA:tone.wav")],
    "media_remote": [("text", "Remote.\n\nMEDIA:https://example.com/cat.png\nMEDIA:http://127.0.0.1:9/x.png")],
    "media_inline": [
        ("text", "Not media: MEDIA:chart.png in a sentence, and `MEDIA:chart.png` in code.\n\n![chart](chart.png)")
    ],
    # (b) a tool writes a file, then the answer names it
    "write_media": [
        ("call", "write", {"path": "out/summary.md", "content": "# Summary\n\nWritten by the write tool.\n"}),
        ("text", "I wrote the summary.\n\nMEDIA:out/summary.md"),
    ],
    "write_only": [
        ("call", "write", {"path": "out/plain.txt", "content": "plain text written by the agent\n"}),
        ("text", "I wrote out/plain.txt for you."),
    ],
    "exec_png": [
        ("call", "exec", {"command": "cp chart.png out-exec.png && ls -l out-exec.png"}),
        ("text", "Made it with exec.\n\nMEDIA:out-exec.png"),
    ],
    # commentary (a progress message before a tool call) carrying a MEDIA: line
    "commentary": [
        ("text_call", "First a look at the chart.\n\nMEDIA:chart.png", "read", {"path": "notes.md"}),
        ("text", "Done looking."),
    ],
    # a tool result that is itself an image (read of a PNG)
    "read_png": [("call", "read", {"path": "chart.png"}), ("echo", "The read tool said: ")],
    # (c) the Gateway's own image tool (offline OpenAI image provider: this server's /v1/images/generations)
    "image_gen": [
        ("call", "image_generate", {"prompt": "an orange square", "size": "1024x1024"}),
        ("echo", "The image tool said: "),
    ],
    # the message tool with a media attachment
    "message_media": [
        (
            "call",
            "message",
            {"action": "send", "message": "Here is the chart via the message tool.", "media": "chart.png"},
        ),
        ("echo", "The message tool said: "),
    ],
}
#: A user message holding this picks the case; a background task's completion wake (``[Inter-session message]``
#: in its turn) is answered with a fixed line and no ``MEDIA:`` of its own.
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


def _parts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, list):
        return [str(p.get("type")) for p in content if isinstance(p, dict)]
    return ["str"] if isinstance(content, str) else []


def model_plan(body: dict[str, Any], ws: str, outside: str) -> tuple[str, tuple | None, dict[str, Any]]:
    """(case, step, info) for a request: the last real user message's ``PROBE:`` case and how many tool results
    followed it pick the step."""
    case = ""
    tools_after = 0
    last_tool = ""
    wake = False
    info: dict[str, Any] = {"roles": [], "tool_parts": [], "user_parts": []}
    for message in body.get("messages") or []:
        role = message.get("role")
        info["roles"].append(role)
        if role == "user":
            info["user_parts"].append(_parts(message))
            found = TRIGGER.search(_text(message))
            if found:  # a real user turn of a case (a tool's image comes back as a user message: not one)
                case, tools_after, wake = found.group(1), 0, False
            elif "[Inter-session message]" in _text(message):  # a background task's completion wake
                wake = True
        elif role == "assistant":
            wake = False
        elif role == "tool":
            tools_after += 1
            last_tool = _text(message)
            info["tool_parts"].append(_parts(message))
    info["wake"] = wake
    # What the last user message said (a wake has no PROBE: of its own): kept short in the log.
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    info["last_user"] = _text(users[-1])[-600:] if users else ""
    info["last_user_parts"] = _parts(users[-1]) if users else []
    info["last_tool"] = last_tool[:1500]
    script = SCRIPTS.get(case) or []
    if wake:  # no MEDIA: line of its own: does the Gateway attach the generated image anyway?
        return case, ("text", "The completion agent here: your image is ready."), info
    if not script:
        return case, None, info
    step = script[min(tools_after, len(script) - 1)]

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{ws}", ws).replace("{outside}", outside).replace("{last_tool}", last_tool)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    step = tuple(fill(v) for v in step)
    if step[0] == "echo":
        step = ("text", step[1] + last_tool)
    return case, step, info


def serve_model(port: int, ws: str, outside: str) -> None:
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
            if self.path.rstrip("/").endswith("/images/generations"):
                body = json.loads(raw)
                print(json.dumps({"images": body}), flush=True)
                b64 = base64.b64encode(GENERATED_PNG).decode()
                self._json(200, {"created": int(time.time()), "data": [{"b64_json": b64}] * int(body.get("n") or 1)})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": "unsupported"}})
                return
            body = json.loads(raw)
            offered = sorted(
                (t.get("function") or t).get("name") for t in body.get("tools") or [] if isinstance(t, dict)
            )
            case, step, info = model_plan(body, ws, outside)
            if step is None:  # no script: say back what this turn was told (a wake's context), verbatim
                step = ("text", "NO SCRIPT. Last user: " + info["last_user"][-400:])
            print(json.dumps({"case": case, "step": step, "tools": offered, **info}), flush=True)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            base = {"id": f"chatcmpl-media{int(time.time() * 1000)}", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": body.get("model")}  # fmt: skip

            def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> None:
                choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
                self.wfile.write(b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n")
                self.wfile.flush()

            def call(tool: str, args: dict[str, Any]) -> None:
                name = tool
                if tool not in offered and TOOL_CALL in offered:  # deferred behind Tool Search
                    name, args = TOOL_CALL, {"id": tool, "args": args}
                c = {"index": 0, "id": f"call_{case}_{len(info['tool_parts'])}", "type": "function",
                     "function": {"name": name, "arguments": ""}}  # fmt: skip
                chunk({"tool_calls": [c]})
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]})
                chunk({}, "tool_calls")

            try:
                chunk({"role": "assistant", "content": ""})
                if step[0] == "call":
                    call(step[1], step[2])
                elif step[0] == "text_call":
                    chunk({"content": step[1]})
                    time.sleep(0.5)
                    call(step[2], step[3])
                else:
                    text = step[1]
                    for i in range(0, len(text), 12):
                        chunk({"content": text[i : i + 12]})
                        time.sleep(0.01)
                    chunk({}, "stop")
                chunk(None, usage={"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"media fake model on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


# ---------------------------------------------------------------------------------------------------------------
# The Gateway (gateway.py's install, offline config and environment; this file as the model)


def start_gateway(direct: bool, image_provider: bool, text_model: bool):
    from realgw.gateway import CuttableGateway, _gateway_env, _merge, _offline_config, ensure_installed, free_port

    install = ensure_installed()
    home = Path(tempfile.mkdtemp(prefix="owc-realgw-media-"))
    for sub in ("logs", "state", "home", "workspace", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    ws = home / "workspace"
    for rel, data in WORKSPACE_FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(data)
    for rel, make in LARGE_FILES.items():
        (ws / rel).write_bytes(make())
    outside = home / "outside" / "outside.png"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_bytes(png(24, 24, (0, 0, 0)))
    port, model_port = free_port(), free_port()
    token = secrets.token_hex(16)
    body = _offline_config(home, port, model_port, token)
    extra: dict[str, Any] = {}
    if not text_model:  # a vision model (the common case): a tool's image result reaches it
        body["models"]["providers"]["fake"]["models"][0]["input"] = ["text", "image"]
    if direct:
        extra["tools"] = {"toolSearch": False}
    if image_provider:
        # The OpenAI image provider pointed at this fake server (direct Images API route: an explicit apiKey).
        extra["models"] = {"providers": {"openai": {
            "baseUrl": f"http://127.0.0.1:{model_port}/v1", "apiKey": "sk-fake", "api": "openai-completions",
            "models": [{"id": "gpt-image-2", "name": "Fake Image", "reasoning": False, "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 8000, "maxTokens": 1000}]}}}  # fmt: skip
        extra["agents"] = {"defaults": {"mediaModels": {"image": {"primary": "openai/gpt-image-2"}}}}
    _merge(body, extra)
    config_path = home / "state" / "openclaw.json"
    config_path.write_text(json.dumps(body, indent=2))
    config_path.chmod(0o600)
    env = _gateway_env(install, home, config_path, env={"OPENCLAW_QA_ALLOW_LOCAL_IMAGE_PROVIDER": "1"})
    model_log = open(home / "logs" / "model.out", "ab")
    model = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve-model", str(model_port), "--ws", str(ws),
         "--outside", str(outside)], stdout=model_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    gw = CuttableGateway(install=install, home=home, port=port, token=token, env=env, model=model)
    try:
        gw.launch()
        gw.wait_ready()
    except BaseException:
        gw.stop()
        raise
    return gw, ws, outside


# ---------------------------------------------------------------------------------------------------------------
# The client side

ADMIN = ("operator.read", "operator.write", "operator.admin")
READ = ("operator.read",)
TERMINAL = ("final", "aborted", "error")
CASE_TIMEOUT_S = 150
#: After a run's terminal, ``chat.history`` is read every 100 ms this long (image_gen: six times as long).
POLL_S = 4.0
#: Strings longer than this are cut in the saved frames (their length and sha256 kept).
CUT = 400


def cut(value: Any, limit: int = CUT) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:120]}…<{len(value)} chars sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]}>"
    if isinstance(value, list):
        return [cut(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: cut(v, limit) for k, v in value.items()}
    return value


#: Response headers kept in the record (lower case).
KEEP_HEADERS = {"content-type", "content-length", "content-disposition", "cache-control", "content-security-policy",
                "etag", "accept-ranges", "www-authenticate", "content-range"}  # fmt: skip


def http(
    base: str, path: str, headers: dict[str, str] | None = None, method: str = "GET", body: bool = False
) -> dict[str, Any]:
    """One HTTP request to the Gateway: status, the headers that matter, the body's size, sha256 and head (``body``:
    the whole body as text too)."""
    req = urllib.request.Request(base + path, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, hdrs, data = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, data = e.code, dict(e.headers), e.read()
    except Exception as e:
        return {"error": repr(e)}
    got = {
        "status": status,
        "headers": {k.lower(): v for k, v in hdrs.items() if k.lower() in KEEP_HEADERS},
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "head": data[:160].decode("utf-8", "replace"),
    }
    if body:
        got["body"] = data.decode("utf-8", "replace")
    return got


def block_types(message: dict[str, Any]) -> list[str] | str:
    content = message.get("content")
    return [b.get("type") for b in content if isinstance(b, dict)] if isinstance(content, list) else "str"


def state_media(home: Path) -> list[dict[str, Any]]:
    out = []
    for root in (home / "state",):
        for p in sorted(root.rglob("*")):
            rel = str(p.relative_to(home))
            if p.is_file() and ("media" in rel.split("/")[1:3] or "/media/" in rel):
                out.append(
                    {"path": rel, "size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                )
    return out


async def probe(gw, ws: Path, outside: Path, out: dict[str, Any], only: list[str]) -> None:
    import trio

    from rawclient import raw_client

    t0 = time.monotonic()
    log: list[dict[str, Any]] = out.setdefault("log", [])
    res: dict[str, Any] = out.setdefault("results", {})
    base = f"http://127.0.0.1:{gw.port}"
    bearer = {"Authorization": f"Bearer {gw.token}"}
    files = [p for p in ws.rglob("*") if p.is_file() and ".git" not in p.parts]
    sha = {str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    sha["<generated>"] = hashlib.sha256(GENERATED_PNG).hexdigest()
    out["workspace_sha256"] = sha

    async with (
        raw_client(gw.url, gw.token, instance_id="A", scopes=ADMIN) as ca,
        raw_client(gw.url, gw.token, instance_id="R", scopes=READ) as cr,
        trio.open_nursery() as nursery,
    ):
        events: list[tuple[float, Any]] = []
        responses: dict[str, Any] = {}
        changed = [trio.Event()]

        async def read_forever(client, name: str) -> None:
            while True:
                frame = await client._read()
                t = round(time.monotonic() - t0, 3)
                log.append({"t": t, "conn": name, "frame": cut(client.frames[-1])})
                client.frames.clear()
                if getattr(frame, "event", None) is None:
                    responses[(name, frame.id)] = frame
                elif name == "A":
                    events.append((t, frame))
                changed[0].set()
                changed[0] = trio.Event()

        hello = ca.frames[-1]["payload"]
        res["hello_policy"] = hello.get("policy")
        res["hello_media_methods"] = sorted(m for m in hello["features"]["methods"]
                                            if re.search(r"media|artifact|file|attach|image|workspace", m))  # fmt: skip
        res["hello_media_events"] = sorted(e for e in hello["features"]["events"]
                                           if re.search(r"media|artifact|file|attach|image", e))  # fmt: skip
        res["hello_R_scopes"] = cr.frames[-1]["payload"]["auth"]["scopes"]
        ca.frames.clear()
        cr.frames.clear()
        nursery.start_soon(read_forever, ca, "A")
        nursery.start_soon(read_forever, cr, "R")

        async def request(method: str, params: Any = None, conn: str = "A") -> dict[str, Any]:
            client = ca if conn == "A" else cr
            req_id = await client.send(method, params)
            log.append(
                {"t": round(time.monotonic() - t0, 3), "conn": conn, "sent": {"method": method, "params": params}}
            )
            while (conn, req_id) not in responses:
                await changed[0].wait()
            r = responses.pop((conn, req_id))
            return {"ok": r.ok, "payload": r.payload, "error": None if r.error is None else {
                "code": r.error.code, "message": r.error.message, "details": r.error.details}}  # fmt: skip

        async def wait_event(match, start: int = 0):
            i = start
            while True:
                while i < len(events):
                    if match(events[i][1]):
                        return i, events[i][1]
                    i += 1
                await changed[0].wait()

        async def get(
            path: str, headers: dict[str, str] | None = None, method: str = "GET", body: bool = False
        ) -> dict[str, Any]:
            return await trio.to_thread.run_sync(lambda: http(base, path, headers, method, body))

        res["subscribe"] = await request("sessions.subscribe", {})

        async def run_case(case: str) -> None:
            r: dict[str, Any] = {}
            res[case] = r
            key = f"agent:main:openwebui-media-{case}-{uuid.uuid4().hex[:8]}"
            run_id = str(uuid.uuid4())
            mark = len(events)
            r["key"] = key
            r["send"] = await request("chat.send", {"sessionKey": key, "message": f"PROBE:{case} please",
                                                    "idempotencyKey": run_id})  # fmt: skip
            _, end = await wait_event(lambda f: f.event == "chat" and f.payload.get("runId") == run_id
                                      and f.payload.get("state") in TERMINAL, mark)  # fmt: skip
            t_final = time.monotonic() - t0
            r["end"] = cut(end.payload, 2000)
            r["t_final"] = round(t_final, 3)
            # The transcript at once (what a client finalizing on the terminal reads) ...
            r["history_at_final"] = cut(await request("chat.history", {"sessionKey": key, "limit": 50}), 4000)
            r["history_at_final_t"] = round(time.monotonic() - t0 - t_final, 3)
            # ... then every 100 ms for POLL_S: when do the media blocks land? (a measurement, not a client design)
            timeline: list[list[Any]] = []
            until = time.monotonic() + (POLL_S * 6 if case == "image_gen" else POLL_S)
            while time.monotonic() < until:
                h = await request("chat.history", {"sessionKey": key, "limit": 50})
                kinds = [
                    [m.get("role"), m.get("__openclaw", {}).get("runId"), block_types(m)]
                    for m in (h.get("payload") or {}).get("messages", [])
                    if m.get("role") == "assistant"
                ]
                if not timeline or timeline[-1][1] != kinds:
                    timeline.append([round(time.monotonic() - t0 - t_final, 3), kinds])
                await trio.sleep(0.1)
            r["history_timeline"] = timeline
            # What the run's own events said about media (the agent stream's mediaUrls, the terminal reply text),
            # and the session's sessions.changed phases after the terminal, relative to it.
            signal_keys = ("mediaUrls", "phase", "terminalReply", "text")
            r["signals"] = []
            for t, f in events[mark:]:
                data = f.payload.get("data") or {}
                if f.event == "agent" and (data.get("mediaUrls") or data.get("phase") == "end"):
                    said = cut({k: v for k, v in data.items() if k in signal_keys}, 300)
                    r["signals"].append(
                        [round(t - t_final, 3), f.event, f.payload.get("runId"), f.payload.get("stream"), said]
                    )
            r["signals"] += [
                [
                    round(t - t_final, 3),
                    "chat",
                    f.payload.get("runId"),
                    f.payload.get("state"),
                    cut(f.payload.get("message"), 300),
                ]
                for t, f in events[mark:]
                if f.event == "chat" and f.payload.get("state") in TERMINAL
            ]
            r["signals"] += [
                [round(t - t_final, 3), "sessions.changed", f.payload.get("phase"), f.payload.get("reason"),
                 f.payload.get("messageId")]
                for t, f in events[mark:]
                if f.event == "sessions.changed" and f.payload.get("sessionKey") == key and t >= t_final
            ]  # fmt: skip
            r["signals"].sort(key=lambda x: x[0])
            r["events"] = [
                {"t": t, "event": f.event, "payload": cut(f.payload, 2000)}
                for t, f in events[mark:]
                if f.event not in ("health", "tick", "presence", "cron", "update.available")
            ]
            hist = await request("chat.history", {"sessionKey": key, "limit": 50})
            r["history"] = cut(hist, 4000)
            r["history_R"] = {"ok": (await request("chat.history", {"sessionKey": key, "limit": 5}, "R"))["ok"]}
            al = await request("artifacts.list", {"sessionKey": key})
            r["artifacts_list"] = cut(al, 2000)
            r["artifacts_list_images"] = cut(await request("artifacts.list", {"sessionKey": key, "type": "image"}), 600)
            by_role = {"sessionKey": key, "messageRole": "assistant"}
            r["artifacts_list_assistant"] = cut(await request("artifacts.list", by_role), 600)
            r["artifacts_list_run"] = cut(await request("artifacts.list", {"runId": run_id}), 600)
            r["artifacts_list_key_run"] = cut(
                await request("artifacts.list", {"sessionKey": key, "runId": run_id}), 600
            )
            downloads = []
            for art in (al.get("payload") or {}).get("artifacts", []) if al["ok"] else []:
                d: dict[str, Any] = {"id": art["id"], "summary": art}
                d["get"] = cut(await request("artifacts.get", {"sessionKey": key, "artifactId": art["id"]}), 600)
                dl = await request("artifacts.download", {"sessionKey": key, "artifactId": art["id"]})
                p = dl.get("payload") or {}
                if p.get("data"):
                    raw = base64.b64decode(p["data"])
                    d["download_bytes"] = {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
                d["download"] = cut(dl, 600)
                d["download_other_key"] = cut(await request("artifacts.download", {
                    "sessionKey": "agent:main:openwebui-media-other", "artifactId": art["id"]}), 300)  # fmt: skip
                d["download_R"] = cut(await request("artifacts.download", {"sessionKey": key, "artifactId": art["id"]},
                                                    "R"), 300)  # fmt: skip
                dlh = await request("artifacts.download", {"sessionKey": key, "artifactId": art["id"],
                                                           "transport": "http"})  # fmt: skip
                d["download_http"] = cut(dlh, 600)
                for label, got in (("plain", p), ("http", dlh.get("payload") or {})):
                    url = got.get("url")
                    if url and url.startswith("/"):
                        d[f"fetch_{label}_url"] = await get(url)
                        bare = url.split("?")[0]
                        d[f"fetch_{label}_bare_noauth"] = await get(bare)
                        d[f"fetch_{label}_bare_bearer"] = await get(bare, bearer)
                        d[f"fetch_{label}_thumb_bearer"] = await get(bare.replace("/full", "/thumbnail"), bearer)
                        d[f"fetch_{label}_head"] = await get(url, method="HEAD")
                        d[f"fetch_{label}_again"] = await get(url)
                        d[f"fetch_{label}_range"] = await get(url, {"Range": "bytes=0-9"})
                        d[f"fetch_{label}_thumb_ticket"] = await get(url.replace("/full?", "/thumbnail?"))
                downloads.append(d)
            r["downloads"] = downloads
            # An artifactId the transcript names that artifacts.list did not (a tool result's image part).
            listed = {d["id"] for d in downloads}
            named = set(re.findall(r'"artifactId": "([^"]+)"', json.dumps(hist.get("payload")))) - listed
            r["downloads_by_history_id"] = {
                aid: cut(await request("artifacts.download", {"sessionKey": key, "artifactId": aid}), 300)
                for aid in sorted(named)
            }
            # Every /api/ URL the history holds: fetched bare, with the bearer token.
            urls = sorted(set(re.findall(r'"(/api/[^"]+)"', json.dumps(hist.get("payload")))))
            r["history_urls"] = {u: {"noauth": await get(u), "bearer": await get(u, bearer)} for u in urls[:8]}
            # The Control UI's assistant-media route for each MEDIA: source of the script.
            texts = [v for step in SCRIPTS.get(case, []) for v in step if isinstance(v, str)]
            sources = [m for t in texts for m in re.findall(r'^MEDIA:"?([^"\n]+)"?$', t, re.M)]
            am = {}
            for src in sources[:4]:
                src = src.replace("{ws}", str(ws)).replace("{outside}", str(outside))
                q = urllib.parse.urlencode({"meta": "1", "source": src, "sessionKey": key})
                meta = await get(f"/__openclaw__/assistant-media?{q}", bearer, body=True)
                entry = {"meta_bearer": meta, "meta_noauth": await get(f"/__openclaw__/assistant-media?{q}")}
                try:
                    ticket = json.loads(meta.get("body") or "{}").get("mediaTicket")
                except ValueError:
                    ticket = None
                if ticket:
                    q2 = urllib.parse.urlencode({"source": src, "sessionKey": key, "mediaTicket": ticket})
                    entry["fetch_ticket"] = await get(f"/__openclaw__/assistant-media?{q2}")
                q3 = urllib.parse.urlencode({"source": src, "sessionKey": key})
                entry["fetch_bearer"] = await get(f"/__openclaw__/assistant-media?{q3}", bearer)
                am[src] = entry
            r["assistant_media"] = am
            r["sessions_files_list"] = cut(await request("sessions.files.list", {"sessionKey": key}), 1500)
            for rel in ("chart.png", "out/summary.md", "report.pdf", "mid.png"):
                r[f"sessions_files_get:{rel}"] = cut(
                    await request("sessions.files.get", {"sessionKey": key, "path": rel}), 500
                )
            r["state_media"] = state_media(gw.home)

        # Once (not per case): the workspace RPCs on a file of each kind.
        res["agents_workspace_list"] = cut(await request("agents.workspace.list", {"agentId": "main"}), 1500)
        for rel in ("chart.png", "report.pdf", "notes.md", "big.png", "mid.png", "noise.png", "blob.bin"):
            res[f"agents_workspace_get:{rel}"] = cut(
                await request("agents.workspace.get", {"agentId": "main", "path": rel}), 500
            )

        async def after_close() -> None:
            """A ticket URL fetched after the connection that asked for it closed (managed media: an HMAC ticket;
            an inline artifact's /api/artifacts/download/ URL: bound to that connection)."""
            got: dict[str, Any] = {}
            for case in ("media_png", "read_png"):
                r = res.get(case) or {}
                arts = (((r.get("artifacts_list") or {}).get("payload") or {}).get("artifacts")) or []
                if not arts:
                    continue
                async with raw_client(gw.url, gw.token, instance_id="T", scopes=ADMIN) as ct:
                    params = {"sessionKey": r["key"], "artifactId": arts[0]["id"], "transport": "http"}
                    resp = await ct.request("artifacts.download", params)
                    url = (resp.payload or {}).get("url")
                    got[f"{case}_url_kind"] = (url or "").split("/")[2] if url else None
                    got[f"{case}_while_open"] = await get(url) if url else None
                got[f"{case}_after_close"] = await get(url) if url else None
            res["ticket_after_close"] = got

        for case in only or list(SCRIPTS):
            try:
                with trio.fail_after(CASE_TIMEOUT_S):
                    await run_case(case)
            except Exception as exc:
                res.setdefault(case, {})["failed"] = repr(exc)
                print(f"case {case} failed: {exc!r}", flush=True)
            print(f"case {case} done", flush=True)
        await after_close()
        nursery.cancel_scope.cancel()


def summary(out: dict[str, Any]) -> str:
    lines = []
    for case, r in out.get("results", {}).items():
        if not isinstance(r, dict) or "key" not in r:
            continue
        end = r.get("end") or {}
        content = (end.get("message") or {}).get("content") or []
        kinds = [c.get("type") for c in content if isinstance(c, dict)]
        arts = ((r.get("artifacts_list") or {}).get("payload") or {}).get("artifacts") or []
        names = [f"{a.get('type')}:{a.get('id', '')[:30]}" for a in arts]
        lines.append(f"{case}: final {end.get('state')} parts={kinds} artifacts={names}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default="/tmp/media_probe.json")
    parser.add_argument("--cases", default="", help="comma-separated cases (default: all of SCRIPTS)")
    parser.add_argument("--direct", action="store_true", help="tools.toolSearch: false (every tool offered directly)")
    parser.add_argument("--keep", action="store_true", help="keep the Gateway's home folder (logs, state, workspace)")
    parser.add_argument("--text-model", action="store_true", help="the fake model takes text only (no images)")
    parser.add_argument("--no-image-provider", action="store_true", help="no offline OpenAI image provider")
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--ws", default="", help=argparse.SUPPRESS)
    parser.add_argument("--outside", default="", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve_model:
        serve_model(opts.serve_model, opts.ws, opts.outside)
        return
    import trio

    only = [c for c in opts.cases.split(",") if c]
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    gw, ws, outside = start_gateway(opts.direct, not opts.no_image_provider, opts.text_model)
    out: dict[str, Any] = {"gateway_home": str(gw.home), "direct": opts.direct, "workspace": str(ws)}
    out["outside"] = str(outside)
    try:
        trio.run(probe, gw, ws, outside, out, only)
    finally:
        model_lines = (gw.home / "logs" / "model.out").read_text(errors="replace").splitlines()
        out["model_log"] = [cut(json.loads(line), 1500) if line.startswith("{") else line for line in model_lines]
        glog = gw.log_tail(100000).splitlines()
        media_re = re.compile(r"media|attach|image|artifact", re.I)
        out["gateway_log_media"] = [line for line in glog if media_re.search(line)][-200:]
        out["gateway_log_tail"] = glog[-80:]
        gw.stop()
        if not opts.keep:  # the workspace holds ~25 MiB of test files
            shutil.rmtree(gw.home, ignore_errors=True)
        Path(opts.out).write_text(json.dumps(out, indent=1, default=str).replace(gw.token, "<token>"))
        print(summary(out))
        print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
