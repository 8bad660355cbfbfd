"""A scripted OpenAI-compatible ``/v1/chat/completions`` server for the real Gateway tier. Loopback only.

It answers the way the simulator's default responder does (``owc.sim.script.fake_model_responder``), so the
same interaction can be driven against both and compared:

* the last real user message contains ``USE_TOOL`` and no tool result followed it: one call to ``read``
  with ``{}`` (the real ``read`` tool then rejects the missing ``path``);
* it contains ``ECHO_TOOL`` and no tool result followed it: the answer's first word (``Hello``), then the
  same call: the next item's text then starts with this one's (how the Gateway's aborted partial holds both);
* it contains ``FAIL_RUN``: HTTP 400 with an OpenAI-style error body (``FAIL_TEXT``), before any text: the run
  ends in an error (a 4xx is not retried);
* it contains ``FAIL_MID``: the first words of the canned answer (``FAIL_MID_TEXT``), then an in-stream error
  chunk (``{"error": {...}}``): an error after streamed text;
* it contains ``SAY_NO``: ``NO`` alone (a short answer that is only a prefix of ``NO_REPLY``);
* this turn's internal context holds ``SAY_HEARTBEAT_OK``: ``HEARTBEAT_OK`` alone. A heartbeat's turn has no
  user words of its own (the runner's prompt is fixed); the ``text`` of the ``wake`` that started it reaches
  the model only as a system event line in that context block, so that is where a test steers one heartbeat;
* it contains ``SLOW``: the canned answer, one word every ``SLOW_DELAY`` seconds (long enough to abort);
* it contains ``LONG`` (and none of the above): ``LONG_ANSWER``, the canned answer 20 times (200 words), one word
  every ``LONG_DELAY`` seconds: ~400 s, longer than the Gateway's 315 s stop drain. Not when the request holds the
  Gateway's restart-recovery prompt (``RECOVERY_MARK``): a recovery of a LONG turn answers at once;
* otherwise: the canned answer, streamed a word at a time.

The Gateway wraps each user turn (a ``[date]`` prefix and a runtime suffix) and appends an internal-context
user message (``<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>``); those are skipped when finding the user's words.

    python fake_model.py PORT
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "Hello from the fake model. This is a canned answer."
INTERNAL_MARK = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
SLOW_DELAY = 1.0
TOOL = "read"
ECHO = ANSWER.split(" ")[0]  # what ECHO_TOOL says before its tool call
ECHO_PAUSE = 0.5
SHORT = "NO"  # what SAY_NO answers: only a prefix of the silent sentinel NO_REPLY
HEARTBEAT_OK = "HEARTBEAT_OK"  # what SAY_HEARTBEAT_OK answers: the acknowledgement chat.history hides
LONG_ANSWER = " ".join([ANSWER] * 20)  # what LONG answers: 200 words
LONG_DELAY = 2.0  # LONG: seconds between words (~400 s in all)
FAIL_TEXT = "fake model failure: the request was refused"  # what FAIL_RUN / FAIL_MID answer as the error
FAIL_MID_TEXT = "Hello from the"  # what FAIL_MID streams before its error
#: In the Gateway's restart-recovery prompt (``[System] Your previous turn was interrupted by a gateway restart ...``).
RECOVERY_MARK = "Your previous turn was interrupted by a gateway restart"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def plan(body: dict[str, Any]) -> tuple[str, bool]:
    """What to answer: ``("tool", _)``, ``("echo_tool", _)``, ``("fail", _)``, ``("fail_mid", _)``, ``("no", _)``,
    ``("heartbeat_ok", _)``,
    ``("long", _)`` or ``("text", slow)``."""
    messages = body.get("messages") or []
    user_words = ""
    context = ""  # the internal context after the last real user message: this turn's, not an older one's
    tool_after_user = False
    for message in messages:
        role = message.get("role")
        if role == "user" and INTERNAL_MARK in _text(message):
            context += _text(message)
        elif role == "user":
            user_words, context, tool_after_user = _text(message), "", False
        elif role == "tool":
            tool_after_user = True
    if "SAY_HEARTBEAT_OK" in context:
        return "heartbeat_ok", False
    offered = {(t.get("function") or t).get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    if "ECHO_TOOL" in user_words and not tool_after_user and TOOL in offered:
        return "echo_tool", False
    if "USE_TOOL" in user_words and not tool_after_user and TOOL in offered:
        return "tool", False
    if "FAIL_RUN" in user_words:
        return "fail", False
    if "FAIL_MID" in user_words:
        return "fail_mid", False
    if "SAY_NO" in user_words:
        return "no", False
    if "LONG" in user_words and not any(RECOVERY_MARK in _text(m) for m in messages):
        return "long", False
    return "text", "SLOW" in user_words


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
            self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "owc"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "bad json"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": "unsupported"}})
            return
        kind, slow = plan(body)
        if kind == "fail":
            self._json(400, {"error": {"message": FAIL_TEXT, "type": "invalid_request_error", "code": "fake_failure"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        base = {
            "id": f"chatcmpl-owc{int(time.time() * 1000)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model"),
        }

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> None:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            self.wfile.write(b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n")
            self.wfile.flush()

        try:
            chunk({"role": "assistant", "content": ""})
            if kind == "fail_mid":
                for i, word in enumerate(FAIL_MID_TEXT.split(" ")):
                    time.sleep(0.02)
                    chunk({"content": word if i == 0 else " " + word})
                error = {"message": FAIL_TEXT, "type": "server_error", "code": "fake_failure"}
                self.wfile.write(b"data: " + json.dumps({"error": error}).encode() + b"\n\n")
                self.wfile.flush()
                self.close_connection = True
                return
            if kind in ("tool", "echo_tool"):
                if kind == "echo_tool":
                    chunk({"content": ECHO})
                    # A pause before the call: the Gateway streams text it has before it knows a tool call
                    # follows (sent together, the text was at times kept back as the call's commentary).
                    time.sleep(ECHO_PAUSE)
                call = {"index": 0, "id": "call_fake1", "type": "function", "function": {"name": TOOL, "arguments": ""}}
                chunk({"tool_calls": [call]})
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
                chunk({}, "tool_calls")
            else:
                words = {"no": [SHORT], "heartbeat_ok": [HEARTBEAT_OK]}.get(kind) or ANSWER.split(" ")
                if kind == "long":
                    words = LONG_ANSWER.split(" ")
                for i, word in enumerate(words):
                    time.sleep(LONG_DELAY if kind == "long" else SLOW_DELAY if slow else 0.02)
                    chunk({"content": word if i == 0 else " " + word})
                chunk({}, "stop")
            chunk(None, usage={"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the Gateway aborted the run
        self.close_connection = True


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    print(f"fake model on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
