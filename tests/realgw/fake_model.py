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
* it contains ``ASK_USER`` and no tool result followed it: one call to the Gateway's ``ask_user`` tool (issue 27):
  directly when the Gateway offers it (``tools.toolSearch: false``), else through Tool Search's ``tool_call`` (the
  Gateway's default, which defers ``ask_user`` behind it). ``ASK_USER`` alone asks two questions (``QUESTIONS``: a
  single select, then a multi select); ``ASK_USER_1`` / ``ASK_USER_2`` / ``ASK_USER_3`` ask the first one, two or
  three; a ``_T<seconds>`` suffix adds ``timeoutSeconds`` (``ASK_USER_1_T30``: one question, 30 s, the shortest the
  tool allows);
  ``ASK_USER_BAD`` sends arguments the tool rejects (a question with one option). After the tool result the answer
  is ``ASK_REPLY_PREFIX`` followed by the tool result's text, verbatim, so a test reads what the run was told;
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
import re
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
#: ``ask_user``'s questions, in the tool's model-facing shape (docs/tools/ask-user.md): a single select, a multi select
#: and another single select. The Gateway always adds a free-text "Other" itself (``isOther: true``).
ASK_TOOL = "ask_user"
#: With Tool Search on (the Gateway's default: ``tools.toolSearch`` unset), ``ask_user`` is not offered directly; the
#: model calls it through this control tool as ``{"id": "ask_user", "args": {...}}`` (docs/tools/tool-search.md).
TOOL_CALL = "tool_call"
QUESTIONS: tuple[dict[str, Any], ...] = (
    {
        "id": "deploy_target",
        "header": "Target",
        "question": "Where should this deploy?",
        "options": [
            {"label": "Staging (Recommended)", "description": "The safe default."},
            {"label": "Production"},
        ],
    },
    {
        "id": "features",
        "header": "Features",
        "question": "Which features should be enabled?",
        "options": [{"label": "Logging"}, {"label": "Metrics"}, {"label": "Tracing"}],
        "multiSelect": True,
    },
    {
        "id": "region",
        "header": "Region",
        "question": "Which region should host it?",
        "options": [{"label": "eu-west"}, {"label": "us-east"}, {"label": "ap-south"}, {"label": "sa-east"}],
    },
)
#: What the model says after ``ask_user``'s result: this, then the result's text verbatim.
ASK_REPLY_PREFIX = "The ask_user tool said: "
_ASK = re.compile(r"ASK_USER(?:_(BAD)|_([123]))?(?:_T(\d+))?")
#: ``SEND_MEDIA a.png b.pdf`` (issue 28): the answer is ``MEDIA_TEXT`` then one standalone ``MEDIA:<name>`` line per
#: name (the shipped rich-output rule), which the Gateway turns into managed files; ``SEND_MEDIA_ONLY`` answers the
#: lines alone (a reply that is only files: a bare ``chat final``, measured).
_MEDIA = re.compile(r"SEND_MEDIA(_ONLY)?((?:[ \t]+[^\s]+)+)")
MEDIA_TEXT = "Here are your files."
#: ``SPAWN_CHILD`` (issue 29): the parent's model spawns a sub-agent (``sessions_spawn``, through ``tool_call`` when
#: Tool Search defers it) whose task holds ``CHILD_WORK``; the child's model runs ``exec`` (``CHILD_SLEEP`` seconds,
#: so a test sees it running) and answers ``CHILD_DONE``; the parent, after the spawn's result, says ``SPAWNED``.
SPAWN = "sessions_spawn"
CHILD_TASK = "CHILD_WORK: run a short command and report."
CHILD_LABEL = "test-child"
CHILD_SLEEP = 3
CHILD_DONE = "CHILD DONE: the command ran."
SPAWNED = "PARENT: the sub-agent is on it."
#: In the Gateway's restart-recovery prompt (``[System] Your previous turn was interrupted by a gateway restart ...``).
RECOVERY_MARK = "Your previous turn was interrupted by a gateway restart"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def ask_user_arguments(user_words: str) -> dict[str, Any] | None:
    """The ``ask_user`` arguments the user's words ask for (``None``: they hold no ``ASK_USER`` trigger)."""
    match = _ASK.search(user_words)
    if match is None:
        return None
    bad, count, timeout = match.groups()
    if bad:
        questions = [{**QUESTIONS[0], "options": QUESTIONS[0]["options"][:1]}]  # one option: the tool wants 2-4
    else:
        questions = [dict(q) for q in QUESTIONS[: int(count or 2)]]
    args: dict[str, Any] = {"questions": questions}
    if timeout:
        args["timeoutSeconds"] = int(timeout)
    return args


def media_answer(user_words: str) -> str:
    """The answer to ``SEND_MEDIA <names>``: the text, then a ``MEDIA:`` line per name (alone for ``_ONLY``)."""
    found = _MEDIA.search(user_words)
    assert found is not None
    lines = "\n".join(f"MEDIA:{name}" for name in found.group(2).split())
    return lines if found.group(1) else f"{MEDIA_TEXT}\n\n{lines}"


def last_tool_text(body: dict[str, Any]) -> str:
    """The text of the last tool result in the request (what the tool told the run)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "tool":
            return _text(message)
    return ""


def _turn(body: dict[str, Any]) -> tuple[str, str, bool]:
    """This turn's user words, its internal context (after the last real user message: this turn's, not an older
    one's) and whether a tool result followed the user's words."""
    user_words = ""
    context = ""
    tool_after_user = False
    for message in body.get("messages") or []:
        role = message.get("role")
        if role == "user" and INTERNAL_MARK in _text(message):
            context += _text(message)
        elif role == "user":
            user_words, context, tool_after_user = _text(message), "", False
        elif role == "tool":
            tool_after_user = True
    return user_words, context, tool_after_user


def plan(body: dict[str, Any]) -> tuple[str, bool]:
    """What to answer: ``("tool", _)``, ``("echo_tool", _)``, ``("ask_user", _)``, ``("ask_user_via_call", _)``,
    ``("ask_reply", _)``,
    ``("fail", _)``, ``("fail_mid", _)``, ``("no", _)``, ``("heartbeat_ok", _)``,
    ``("long", _)`` or ``("text", slow)``."""
    messages = body.get("messages") or []
    user_words, context, tool_after_user = _turn(body)
    if "SAY_HEARTBEAT_OK" in context:
        return "heartbeat_ok", False
    offered = {(t.get("function") or t).get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    if "ECHO_TOOL" in user_words and not tool_after_user and TOOL in offered:
        return "echo_tool", False
    if "USE_TOOL" in user_words and not tool_after_user and TOOL in offered:
        return "tool", False
    if ask_user_arguments(user_words) is not None and (ASK_TOOL in offered or TOOL_CALL in offered):
        if tool_after_user:
            return "ask_reply", False
        return ("ask_user" if ASK_TOOL in offered else "ask_user_via_call"), False
    if "CHILD_WORK" in user_words:
        return ("child_done" if tool_after_user else "child_exec"), False
    if "SPAWN_CHILD" in user_words and (SPAWN in offered or TOOL_CALL in offered):
        return ("spawned" if tool_after_user else ("spawn" if SPAWN in offered else "spawn_via_call")), False
    if _MEDIA.search(user_words):
        return "media", False
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
        offered = sorted((t.get("function") or t).get("name") for t in body.get("tools") or [] if isinstance(t, dict))
        # One line a request in the model's log: what was planned and which tools the Gateway offered.
        print(json.dumps({"plan": kind, "tools": offered}), flush=True)
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
            elif kind in ("ask_user", "ask_user_via_call"):
                args = ask_user_arguments(_turn(body)[0]) or {}
                name = ASK_TOOL
                if kind == "ask_user_via_call":  # the Gateway's default Tool Search surface: ask_user is deferred
                    name, args = TOOL_CALL, {"id": ASK_TOOL, "args": args}
                call = {"index": 0, "id": "call_ask1", "type": "function", "function": {"name": name, "arguments": ""}}
                chunk({"tool_calls": [call]})
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]})
                chunk({}, "tool_calls")
            elif kind in ("spawn", "spawn_via_call", "child_exec"):
                name, args = SPAWN, {"task": CHILD_TASK, "label": CHILD_LABEL}
                if kind == "spawn_via_call":
                    name, args = TOOL_CALL, {"id": SPAWN, "args": args}
                elif kind == "child_exec":
                    name, args = "exec", {"command": f"sleep {CHILD_SLEEP}; echo child-ok"}
                call = {
                    "index": 0,
                    "id": f"call_{kind}",
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                chunk({"tool_calls": [call]})
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]})
                chunk({}, "tool_calls")
            elif kind in ("spawned", "child_done"):
                chunk({"content": SPAWNED if kind == "spawned" else CHILD_DONE})
                chunk({}, "stop")
            elif kind == "media":
                chunk({"content": media_answer(_turn(body)[0])})
                chunk({}, "stop")
            elif kind == "ask_reply":
                chunk({"content": ASK_REPLY_PREFIX + last_tool_text(body)})
                chunk({}, "stop")
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
