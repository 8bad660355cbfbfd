"""Measure OpenClaw 2026.9.6's ``ask_user`` end to end on the real Gateway (issue 27); runnable by hand.

    python3 tests/realgw/probe_ask_user.py [OUT.json]

It starts the real Gateway offline on loopback with the project's fake model (``tests/realgw/gateway.py``,
``start_cuttable``; the model's ``ASK_USER`` triggers, ``tests/realgw/fake_model.py``) and drives it with raw
protocol-4 clients (``tests/rawclient.py``) on four connections that read all the time:

* ``A``: scopes read+write+admin (what owc asks today), caps ``tool-events``: it sends the turns and answers;
* ``B``: another operator with the same scopes (does a second connection see the question events?);
* ``RW``: read+write only (no ``operator.questions``, no admin);
* ``Q``: read+write+``operator.questions``;
* ``N``: like ``A`` but no caps and no ``sessions.subscribe`` (are question events tied to either?).

Cases, each on a session key of its own (``agent:main:openwebui-ask-<case>-<uuid>``):
``answer`` (two questions, answered after the error cases of ``question.resolve``), ``cancel`` (``cancel:true``),
``expiry`` (``timeoutSeconds: 30``, the shortest the tool takes: the probe waits it out), ``abort`` (``chat.abort``
while pending), ``plain`` (a ``chat.send`` on the same key while pending), ``three`` (three questions, the multi
select answered with two options and one "Other" free text), ``bad`` (arguments the tool rejects), ``grace`` (a
resolved record read again after the manager's 15 s grace).

Writes every frame each connection received (``{t, conn, frame}``, ``t`` in seconds since the start) and every
request/response of the probe to OUT.json (default ``/tmp/ask_user_probe.json``), and prints a summary. Stops the
Gateway and the model by pid at the end, whatever happened. Takes about two minutes (the expiry case waits 30 s,
the grace case 16 s).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: rawclient, realgw, tierlock

import trio  # noqa: E402

from owc.protocol import EventFrame, Response  # noqa: E402

from rawclient import RawClient, raw_client  # noqa: E402
from realgw.gateway import ensure_installed, start_cuttable  # noqa: E402

ADMIN = ("operator.read", "operator.write", "operator.admin")
READ_WRITE = ("operator.read", "operator.write")
QUESTIONS = ("operator.read", "operator.write", "operator.questions")
TERMINAL = ("final", "aborted", "error")
#: Each case's bound (the expiry case waits 30 s; a Gateway run's first turn takes 10-20 s on this machine).
CASE_TIMEOUT_S = 150


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
        """The first event at index >= ``start`` for which ``match`` holds (waits for it)."""
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


def _asked(key: str):
    return lambda f: f.event == "question.requested" and f.payload.get("sessionKey") == key


def _resolved(qid: str):
    return lambda f: f.event == "question.resolved" and f.payload.get("id") == qid


def _res(r: Response) -> dict[str, Any]:
    return {"ok": r.ok, "payload": r.payload, "error": None if r.error is None else {
        "code": r.error.code, "message": r.error.message, "details": r.error.details}}  # fmt: skip


async def probe(url: str, token: str, out: dict[str, Any], only: list[str]) -> None:
    t0 = time.monotonic()
    log: list[dict[str, Any]] = out.setdefault("log", [])
    res: dict[str, Any] = out.setdefault("results", {})
    async with (
        raw_client(url, token, instance_id="A", scopes=ADMIN) as ca,
        raw_client(url, token, instance_id="B", scopes=ADMIN) as cb,
        raw_client(url, token, instance_id="RW", scopes=READ_WRITE) as crw,
        raw_client(url, token, instance_id="Q", scopes=QUESTIONS) as cq,
        raw_client(url, token, instance_id="N", scopes=ADMIN, caps=()) as cn,
        trio.open_nursery() as nursery,
    ):
        conns = {n: Conn(n, c, t0, log) for n, c in (("A", ca), ("B", cb), ("RW", crw), ("Q", cq), ("N", cn))}
        for c in conns.values():
            res[f"hello_{c.name}"] = {"auth": c.client.frames[-1]["payload"].get("auth"),
                                      "events_has_question": [e for e in c.client.frames[-1]["payload"]
                                                              .get("features", {}).get("events", [])
                                                              if e.startswith("question.")],
                                      "methods_question": [m for m in c.client.frames[-1]["payload"]
                                                           .get("features", {}).get("methods", [])
                                                           if m.startswith("question.")]}  # fmt: skip
            nursery.start_soon(c.read_forever)
        a, b, rw, q = conns["A"], conns["B"], conns["RW"], conns["Q"]
        for c in (a, b, rw, q):  # N asks no subscription (and declares no caps)
            res[f"subscribe_{c.name}"] = _res(await c.request("sessions.subscribe", {}))

        async def send(case: str, message: str) -> tuple[str, str, int]:
            key = f"agent:main:openwebui-ask-{case}-{uuid.uuid4()}"
            run_id = str(uuid.uuid4())
            mark = len(a.events)
            sent = await a.request("chat.send", {"sessionKey": key, "message": message, "idempotencyKey": run_id})
            res[f"{case}_send"] = _res(sent)
            return key, run_id, mark

        async def history(case: str, key: str) -> None:
            res[f"{case}_history"] = _res(await a.request("chat.history", {"sessionKey": key, "limit": 50}))

        state: dict[str, str] = {}

        # -- answer: two questions; the error cases of question.resolve first -----------------------------------------
        async def case_answer() -> None:
            key, run_id, mark = await send("answer", "ASK_USER please decide")
            _, asked = await a.wait_event(_asked(key), mark)
            qid = asked.payload["id"]
            res["answer_requested"] = asked.payload
            await trio.sleep(1.0)  # let every connection get what it gets
            for c in conns.values():
                res[f"answer_requested_seen_by_{c.name}"] = any(_asked(key)(f) for _, f in c.events)
            res["answer_list_A"] = _res(await a.request("question.list", {}))
            res["answer_list_RW"] = _res(await rw.request("question.list", {}))
            res["answer_list_Q"] = _res(await q.request("question.list", {}))
            res["answer_get_A"] = _res(await a.request("question.get", {"id": qid}))
            res["answer_get_Q"] = _res(await q.request("question.get", {"id": qid}))
            res["answer_get_unknown"] = _res(await a.request("question.get", {"id": "ask_nope"}))
            # A connection opened while the question is pending: what its hello holds, whether it is told.
            async with raw_client(url, token, instance_id="LATE", scopes=ADMIN) as late:
                hello = late.frames[-1]["payload"]
                res["answer_late_hello_snapshot_keys"] = sorted((hello.get("snapshot") or {}).keys())
                res["answer_late_hello_mentions_question"] = qid in json.dumps(hello)
                got = []
                with trio.move_on_after(2.0):
                    while True:
                        got.append((await late.event()).event)
                res["answer_late_events_2s"] = got
                res["answer_late_list"] = _res(await late.request("question.list", {}))
            res["err_resolve_unknown_id"] = _res(
                await a.request("question.resolve", {"id": "ask_nope", "cancel": True})
            )
            res["err_resolve_RW"] = _res(await rw.request("question.resolve", {"id": qid, "cancel": True}))
            bad_answers = {
                "missing_question": {"deploy_target": ["Production"]},
                "unknown_question_id": {"deploy_target": ["Production"], "features": ["Logging"], "nope": ["x"]},
                "two_in_single": {"deploy_target": ["Production", "Staging (Recommended)"], "features": ["Logging"]},
                "empty_value": {"deploy_target": ["  "], "features": ["Logging"]},
            }
            for name, given in bad_answers.items():
                resolved = await a.request("question.resolve", {"id": qid, "answers": {"answers": given}})
                res[f"err_resolve_{name}"] = _res(resolved)
            flat = {"deploy_target": ["Production"], "features": ["Logging"]}
            res["err_resolve_flat_answers"] = _res(await a.request("question.resolve", {"id": qid, "answers": flat}))
            both = {"id": qid, "cancel": True, "answers": {"answers": flat}}
            res["err_resolve_both"] = _res(await a.request("question.resolve", both))
            res["err_resolve_cancel_false"] = _res(await a.request("question.resolve", {"id": qid, "cancel": False}))
            res["answer_still_pending"] = _res(await a.request("question.get", {"id": qid}))
            answers = {"answers": {"deploy_target": [" production "], "features": ["Metrics", "Logging"]}}
            b_mark = len(b.events)
            res["answer_resolve"] = _res(await a.request("question.resolve", {"id": qid, "answers": answers}))
            _, resolved = await a.wait_event(_resolved(qid), mark)
            res["answer_resolved_event"] = resolved.payload
            _, end = await a.wait_event(_end(run_id), mark)
            res["answer_end"] = end.payload
            await trio.sleep(0.5)
            for c in conns.values():
                res[f"answer_resolved_seen_by_{c.name}"] = any(_resolved(qid)(f) for _, f in c.events)
            res["answer_B_events_after_resolve"] = [f.event for f in b.since(b_mark)]
            res["answer_get_after"] = _res(await a.request("question.get", {"id": qid}))
            res["answer_list_after"] = _res(await a.request("question.list", {}))
            res["err_resolve_again"] = _res(await a.request("question.resolve", {"id": qid, "cancel": True}))
            await history("answer", key)
            res["answer_events_A"] = [{"event": f.event, "payload": f.payload} for f in a.since(mark)]
            state["grace_qid"] = qid

        # -- cancel ---------------------------------------------------------------------------------------------------
        async def case_cancel() -> None:
            key, run_id, mark = await send("cancel", "ASK_USER_1 please decide")
            _, asked = await a.wait_event(_asked(key), mark)
            qid = asked.payload["id"]
            res["cancel_requested"] = asked.payload
            res["cancel_resolve"] = _res(await a.request("question.resolve", {"id": qid, "cancel": True}))
            _, resolved = await a.wait_event(_resolved(qid), mark)
            res["cancel_resolved_event"] = resolved.payload
            _, end = await a.wait_event(_end(run_id), mark)
            res["cancel_end"] = end.payload
            res["cancel_get_after"] = _res(await a.request("question.get", {"id": qid}))
            await history("cancel", key)
            res["cancel_events_A"] = [{"event": f.event, "payload": f.payload} for f in a.since(mark)]

        # -- resolvedby: answered by another operator (B), with a resolvedBy of its own -------------------------------
        async def case_resolvedby() -> None:
            key, run_id, mark = await send("resolvedby", "ASK_USER_1 please decide")
            _, asked = await a.wait_event(_asked(key), mark)
            qid = asked.payload["id"]
            res["resolvedby_resolve"] = _res(await b.request(
                "question.resolve", {"id": qid, "answers": {"answers": {"deploy_target": ["Production"]}},
                                     "resolvedBy": "owc:test"}))  # fmt: skip
            _, resolved = await a.wait_event(_resolved(qid), mark)
            res["resolvedby_resolved_event"] = resolved.payload
            await a.wait_event(_end(run_id), mark)
            res["resolvedby_get_after"] = _res(await a.request("question.get", {"id": qid}))

        # -- abort while pending --------------------------------------------------------------------------------------
        async def case_abort() -> None:
            key, run_id, mark = await send("abort", "ASK_USER_1 please decide")
            _, asked = await a.wait_event(_asked(key), mark)
            qid = asked.payload["id"]
            res["abort_abort"] = _res(await a.request("chat.abort", {"sessionKey": key, "runId": run_id}))
            _, resolved = await a.wait_event(_resolved(qid), mark)
            res["abort_resolved_event"] = resolved.payload
            _, end = await a.wait_event(_end(run_id), mark)
            res["abort_end"] = end.payload
            res["abort_get_after"] = _res(await a.request("question.get", {"id": qid}))
            await trio.sleep(1.0)
            await history("abort", key)
            res["abort_events_A"] = [{"event": f.event, "payload": f.payload} for f in a.since(mark)]

        # -- plain: a chat.send on the same key while pending ---------------------------------------------------------
        async def case_plain() -> None:
            key, run_id, mark = await send("plain", "ASK_USER_1 please decide")
            _, asked = await a.wait_event(_asked(key), mark)
            qid = asked.payload["id"]
            run2 = str(uuid.uuid4())
            res["plain_send2"] = _res(
                await a.request("chat.send", {"sessionKey": key, "message": "Production", "idempotencyKey": run2})
            )
            _, resolved = await a.wait_event(_resolved(qid), mark)
            res["plain_resolved_event"] = resolved.payload
            _, end = await a.wait_event(_end(run_id), mark)
            res["plain_end"] = end.payload
            res["plain_get_after"] = _res(await a.request("question.get", {"id": qid}))
            with trio.move_on_after(20):
                _, end2 = await a.wait_event(_end(run2), mark)
                res["plain_end2"] = end2.payload
            await trio.sleep(1.0)
            await history("plain", key)
            res["plain_events_A"] = [{"event": f.event, "payload": f.payload} for f in a.since(mark)]

        # -- three questions, answered by Q (operator.questions, no admin): free text, two options in the multi select
        async def case_three() -> None:
            key, run_id, mark = await send("three", "ASK_USER_3 please decide")
            _, asked = await a.wait_event(_asked(key), mark)
            qid = asked.payload["id"]
            res["three_requested"] = asked.payload
            answers = {"answers": {"deploy_target": ["Somewhere else entirely"], "features": ["Tracing", "my own"],
                                   "region": ["eu-west"]}}  # fmt: skip
            res["three_resolve_Q"] = _res(await q.request("question.resolve", {"id": qid, "answers": answers}))
            await a.wait_event(_end(run_id), mark)
            await history("three", key)

        # -- bad arguments --------------------------------------------------------------------------------------------
        async def case_bad() -> None:
            key, run_id, mark = await send("bad", "ASK_USER_BAD please decide")
            _, end = await a.wait_event(_end(run_id), mark)
            res["bad_end"] = end.payload
            await history("bad", key)
            res["bad_events_A"] = [{"event": f.event, "payload": f.payload} for f in a.since(mark)]

        # -- expiry: 30 s ---------------------------------------------------------------------------------------------
        async def case_expiry() -> None:
            key, run_id, mark = await send("expiry", "ASK_USER_1_T30 please decide")
            _, asked = await a.wait_event(_asked(key), mark)
            qid = asked.payload["id"]
            res["expiry_requested"] = asked.payload
            t_asked = time.monotonic()
            _, resolved = await a.wait_event(_resolved(qid), mark)
            res["expiry_resolved_event"] = resolved.payload
            res["expiry_after_s"] = round(time.monotonic() - t_asked, 2)
            res["expiry_resolve_late"] = _res(await a.request("question.resolve", {"id": qid, "cancel": True}))
            _, end = await a.wait_event(_end(run_id), mark)
            res["expiry_end"] = end.payload
            await history("expiry", key)
            res["expiry_events_A"] = [{"event": f.event, "payload": f.payload} for f in a.since(mark)]

        # -- request: an operator's own question.request (no run), 2 s expiry ---------------------------------------
        async def case_request() -> None:
            key = f"agent:main:openwebui-ask-request-{uuid.uuid4()}"
            mark = len(a.events)
            question = {"questionId": "pick", "header": "Pick", "question": "Which one?", "isOther": True,
                        "options": [{"label": "One"}, {"label": "Two"}]}  # fmt: skip
            made = await a.request("question.request", {"questions": [question], "sessionKey": key, "timeoutMs": 2000})
            res["request_request"] = _res(made)
            if not made.ok:  # the session key names no session yet: try again without one
                made = await a.request("question.request", {"questions": [question], "timeoutMs": 2000})
                res["request_request_no_key"] = _res(made)
            qid = made.payload["id"]
            _, asked = await a.wait_event(lambda f: f.event == "question.requested" and f.payload["id"] == qid, mark)
            res["request_requested"] = asked.payload
            t = time.monotonic()
            res["request_wait"] = _res(await a.request("question.waitAnswer", {"id": qid, "timeoutMs": 10000}))
            _, resolved = await a.wait_event(_resolved(qid), mark)
            res["request_resolved_event"] = resolved.payload
            res["request_expired_after_s"] = round(time.monotonic() - t, 2)
            res["request_get_after"] = _res(await a.request("question.get", {"id": qid}))

        # -- grace: the first question, long after its answer ---------------------------------------------------------
        async def case_grace() -> None:
            res["grace_get"] = _res(await a.request("question.get", {"id": state["grace_qid"]}))
            res["grace_resolve"] = _res(await a.request("question.resolve", {"id": state["grace_qid"], "cancel": True}))

        cases = {
            "answer": case_answer, "cancel": case_cancel, "resolvedby": case_resolvedby, "abort": case_abort,
            "plain": case_plain, "three": case_three, "bad": case_bad, "expiry": case_expiry, "request": case_request,
            "grace": case_grace,
        }  # fmt: skip
        for name in only or list(cases):
            try:
                with trio.fail_after(CASE_TIMEOUT_S):
                    await cases[name]()
            except Exception as exc:  # a probe: note it and go on with the next case
                res[f"{name}_failed"] = repr(exc)
                print(f"case {name} failed: {exc!r}", flush=True)

        res["events_seen"] = {n: sorted({f.event for _, f in c.events}) for n, c in conns.items()}
        res["question_events_seen"] = {
            n: [[t, f.event, f.payload.get("id"), f.payload.get("status")] for t, f in c.events
                if f.event.startswith("question.")] for n, c in conns.items()}  # fmt: skip
        nursery.cancel_scope.cancel()


#: Events left out of the frames appendix: not about the run or the question.
NOISE = {"health", "tick", "cron", "sessions.changed", "chat.metadata.changed", "update.available", "skills.changed"}


#: Keys whose values the frames appendix leaves out: bookkeeping of no use to a reader here.
#: A frame's line in the appendix is cut here (``chat.history`` answers: the main document shows them whole).
LINE_LIMIT = 1000
DROP = {"session", "__openclaw", "sessionInfo", "defaults", "usage", "cost", "transcriptPosition"}


def _trim(value: Any, limit: int = 200) -> Any:
    """A frame for reading: long strings cut (their length said), bookkeeping blobs (``DROP``) left out."""
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}…<{len(value)} chars>"
    if isinstance(value, list):
        return [_trim(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: ("<trimmed>" if k in DROP else _trim(v, limit)) for k, v in value.items()}
    return value


def frames_md(out: dict[str, Any], conn: str = "A") -> str:
    """Connection ``conn``'s frames, case by case (a case runs from its ``chat.send`` to the next case's), trimmed."""
    blocks: list[tuple[str, list[str]]] = [("before the first case", [])]
    for entry in out["log"]:
        if entry["conn"] != conn:
            continue
        sent = entry.get("sent")
        if sent and sent["method"] == "chat.send" and "ASK_USER" in sent["params"]["message"]:
            blocks.append((sent["params"]["sessionKey"].split(":")[-1], []))
        if sent:
            blocks[-1][1].append(f"{entry['t']:8.3f} -> {json.dumps(_trim(sent), ensure_ascii=False)}")
            continue
        frame = entry["frame"]
        if frame.get("type") == "event" and frame.get("event") in NOISE:
            continue
        if frame.get("type") == "res" and (frame.get("payload") or {}).get("type") == "hello-ok":
            continue
        line = json.dumps(_trim(frame), ensure_ascii=False)
        line = line if len(line) <= LINE_LIMIT else f"{line[:LINE_LIMIT]}…<{len(line)} chars>"
        blocks[-1][1].append(f"{entry['t']:8.3f} <- {line}")
    lines = [
        f"# Appendix: ask_user frames on connection {conn}, case by case",
        "",
        "Made by `tests/realgw/probe_ask_user.py OUT.json --frames MD`. Times in seconds since the probe started;",
        f"strings cut at 200 characters, lines at {LINE_LIMIT}; keys {sorted(DROP)} and events {sorted(NOISE)}",
        "left out.",
        "",
    ]
    for title, body in blocks:
        lines += [f"## {title}", "```", *body, "```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default="/tmp/ask_user_probe.json")
    parser.add_argument("--direct", action="store_true", help="tools.toolSearch: false (ask_user offered directly)")
    parser.add_argument("--cases", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--frames", metavar="MD", help="only write connection A's frames of an earlier OUT as MD")
    opts = parser.parse_args()
    if opts.frames:
        Path(opts.frames).write_text(frames_md(json.loads(Path(opts.out).read_text())) + "\n")
        return
    only = [c for c in opts.cases.split(",") if c]
    # A SIGTERM (a ``timeout`` around the probe) must still reach the ``finally`` that stops the Gateway by pid.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    config = {"tools": {"toolSearch": False}} if opts.direct else None
    gw = start_cuttable(ensure_installed(), config=config)
    out: dict[str, Any] = {"gateway_home": str(gw.home), "direct": opts.direct}
    try:
        trio.run(probe, gw.url, gw.token, out, only)
    finally:
        out["model_log"] = (gw.home / "logs" / "model.out").read_text(errors="replace").splitlines()
        gw.stop()
        Path(opts.out).write_text(json.dumps(out, indent=1, default=str).replace(gw.token, "<token>"))
        print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
