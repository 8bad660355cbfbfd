"""A fake Claude Code CLI (`claude`) for the OpenClaw claude-cli backend, offline (issue 14: the real Gateway's
container row, ``tests/test_realgw_cuts.py``; put on the Gateway's PATH by ``gateway.fake_claude_bin``).

* ``claude --version``            -> ``2.1.120 (Claude Code)``
* ``claude auth status --json``   -> ``{"loggedIn": true, "authMethod": "api_key"}``
* ``--input-format stream-json``  -> the bidirectional stream-json control protocol the live session uses
  (extensions/anthropic/cli-transport): answers ``control_request initialize``, then per ``user`` message
  emits system/init, stream_event text deltas, an assistant message and a ``result``.
* otherwise (one-shot ``-p``)     -> reads the prompt (stdin/args), prints init/assistant/result, exits 0.

The answer is the project's canned answer; with ``SLOW`` in the prompt one word a second, with ``LONG`` 450
words a second apart. SIGTERM -> exit code 143 (as the real Claude Code, a Node program, does).
Every call is logged to $FAKECLAUDE_LOG when set (argv, received lines, signals).
"""

import json
import os
import signal
import sys
import threading
import time
import uuid

ANSWER = "Hello from the fake model. This is a canned answer."
LOG = os.environ.get("FAKECLAUDE_LOG") or os.devnull
_lock = threading.Lock()


def log(*parts):
    with open(LOG, "a") as f:
        f.write(f"{time.time():.3f} pid={os.getpid()} " + " ".join(str(p) for p in parts) + "\n")


def out(obj):
    with _lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def on_term(signum, frame):
    log("got signal", signum, "-> exit 143")
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)

argv = sys.argv[1:]
log("argv", json.dumps(argv))

if argv[:1] == ["--version"] or argv[:1] == ["-v"]:
    print("2.1.120 (Claude Code)")
    sys.exit(0)
if argv[:2] == ["auth", "status"]:
    print(json.dumps({"loggedIn": True, "authMethod": "api_key"}))
    sys.exit(0)


def arg(name, default=None):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


SESSION = arg("--session-id") or arg("--resume") or str(uuid.uuid4())
MODEL = arg("--model", "claude-sonnet-5")


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def answer_words(prompt):
    if "LONG" in prompt:
        return (" ".join([ANSWER] * 45)).split(" "), 1.0
    return ANSWER.split(" "), (1.0 if "SLOW" in prompt else 0.02)


def turn(prompt, stream=True):
    out(
        {
            "type": "system",
            "subtype": "init",
            "session_id": SESSION,
            "model": MODEL,
            "cwd": os.getcwd(),
            "tools": [],
            "mcp_servers": [],
            "permissionMode": "default",
            "apiKeySource": "none",
            "claude_code_version": "2.1.120",
            "uuid": str(uuid.uuid4()),
        }
    )
    words, delay = answer_words(prompt)
    msg_id = f"msg_fake{int(time.time() * 1000)}"
    base_msg = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 0},
    }
    if stream:
        out(
            {
                "type": "stream_event",
                "event": {"type": "message_start", "message": base_msg},
                "session_id": SESSION,
                "parent_tool_use_id": None,
                "uuid": str(uuid.uuid4()),
            }
        )
        out(
            {
                "type": "stream_event",
                "event": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                "session_id": SESSION,
                "parent_tool_use_id": None,
                "uuid": str(uuid.uuid4()),
            }
        )
    text = ""
    for i, w in enumerate(words):
        time.sleep(delay)
        piece = w if i == 0 else " " + w
        text += piece
        if stream:
            out(
                {
                    "type": "stream_event",
                    "event": {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                    "session_id": SESSION,
                    "parent_tool_use_id": None,
                    "uuid": str(uuid.uuid4()),
                }
            )
    if stream:
        out(
            {
                "type": "stream_event",
                "event": {"type": "content_block_stop", "index": 0},
                "session_id": SESSION,
                "parent_tool_use_id": None,
                "uuid": str(uuid.uuid4()),
            }
        )
    full = dict(
        base_msg,
        content=[{"type": "text", "text": text}],
        stop_reason="end_turn",
        usage={"input_tokens": 10, "output_tokens": len(words)},
    )
    out(
        {
            "type": "assistant",
            "message": full,
            "parent_tool_use_id": None,
            "session_id": SESSION,
            "uuid": str(uuid.uuid4()),
        }
    )
    if stream:
        out(
            {
                "type": "stream_event",
                "event": {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": len(words)},
                },
                "session_id": SESSION,
                "parent_tool_use_id": None,
                "uuid": str(uuid.uuid4()),
            }
        )
        out(
            {
                "type": "stream_event",
                "event": {"type": "message_stop"},
                "session_id": SESSION,
                "parent_tool_use_id": None,
                "uuid": str(uuid.uuid4()),
            }
        )
    out(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 1000,
            "duration_api_ms": 1000,
            "num_turns": 1,
            "result": text,
            "stop_reason": "end_turn",
            "session_id": SESSION,
            "total_cost_usd": 0,
            "usage": {"input_tokens": 10, "output_tokens": len(words)},
            "uuid": str(uuid.uuid4()),
        }
    )
    log("turn done", len(words), "words")


if arg("--input-format") == "stream-json":
    log("live session", SESSION)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            log("bad line", line[:200])
            continue
        log("recv", line[:300])
        if msg.get("type") == "control_request":
            req = msg.get("request") or {}
            if req.get("subtype") == "initialize":
                out(
                    {
                        "type": "control_response",
                        "response": {
                            "subtype": "success",
                            "request_id": msg["request_id"],
                            "response": {"commands": [], "models": [], "account": {}},
                        },
                    }
                )
            else:
                out(
                    {
                        "type": "control_response",
                        "response": {"subtype": "success", "request_id": msg["request_id"], "response": {}},
                    }
                )
        elif msg.get("type") == "control_response":
            pass
        elif msg.get("type") == "user":
            prompt = text_of((msg.get("message") or {}).get("content"))
            threading.Thread(target=turn, args=(prompt,), daemon=True).start()
    log("stdin closed; exit 0")
    sys.exit(0)
else:
    prompt = " ".join(a for a in argv if not a.startswith("-"))
    if not sys.stdin.isatty():
        try:
            prompt += sys.stdin.read()
        except Exception:
            pass
    log("one-shot prompt", prompt[:300])
    fmt = arg("--output-format", "text")
    if fmt in ("stream-json", "json"):
        turn(prompt, stream=False)
    else:
        words, delay = answer_words(prompt)
        print(" ".join(words))
    sys.exit(0)
