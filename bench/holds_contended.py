"""Issue 32, goal 3's harder cases: owc's lock holds at 1,000 messages on SQLite and durable PostgreSQL, idle, while
runs stream, and beside an Open WebUI-style writer saving every 2 ms; and the floor each database sets.

    PYTHONPATH=. python3 bench/holds_contended.py                      # 3 rounds, both databases, ~5-8 minutes
    PYTHONPATH=. python3 bench/holds_contended.py --rounds 1 --runs 20 --no-postgres   # a smoke run

Cases, each round, per database (a chat of ``--messages`` messages of ~400 characters, ``bench/store_hold.chat_of``):

- ``idle``: ``--ops`` claims, then as many finalizes, one after another, through ``open_store`` (section 2 of
  throughput.py, the reference).
- ``stream``: the real runtime on the simulator, ``--runs`` runs at once, each in its own chat of that size (many
  people's chats), streaming ``--deltas`` text deltas with ``--tools`` tool calls each, paced ``--pace-ms`` between
  rounds of deltas, then ending: every lock owc takes meanwhile (claims, status lines, finalizes) is counted.
- ``writer``: the ``idle`` claims and finalizes while a separate process saves the same chat as Open WebUI does
  (``competing_writer.py``: lock, read, change the title, write back, commit) every ``--writer-ms``. Its waits and
  give-ups are printed beside owc's holds. On PostgreSQL a hold is timed from the statement that asks for the row
  lock, so it holds any wait for the writer's lock too (the line says so).
- ``floor``: what the database itself costs for a write of that chat, no owc: SQLite ``BEGIN IMMEDIATE``, ``UPDATE``
  of the same text, ``COMMIT`` (owc's pragmas); PostgreSQL an autocommit ``UPDATE`` of the same text (the row's WAL
  and its fsync at commit) and a one-row ``UPDATE`` of a tiny table (the fsync alone).

Holds are timed on the wire (``dbprobe.LockProbe``: SQLite from ``BEGIN IMMEDIATE`` returning, PostgreSQL from the
locking statement being sent, both to the end of the commit). Every figure is printed as min / median over rounds,
with ``uptime`` before and after and the load average per case; PASS / FAIL lines judge hold p99 < 10 ms and the
writer's wait p99 < 100 ms with no give-up, on the median over rounds. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import trio
from competing_writer import competing_writer
from dbprobe import LockProbe, pct
from store_hold import chat_of
from throughput import (
    FINAL_OUTPUT,
    PG_DURABLE,
    _filesystem,
    loadavg,
    log,
    low,
    med,
    start_durable_postgres,
    until_progress,
    uptime,
)
from workloads import TOKEN, USER, CountingEmitter, chat_ids, piece, session_key

from owc.runtime import RuntimeConfig, open_runtime
from owc.sim import open_simulator
from owc.store import open_store


def _figures(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": med(ms), "p99": pct(ms, 0.99), "max": max(ms) if ms else float("nan")}


async def case_idle(url: str, args: argparse.Namespace, probe: LockProbe, writer_ms: float | None = None) -> dict:
    """Claims then finalizes, one after another, on one chat; with ``writer_ms`` a competing writer saves it too."""
    out: dict[str, Any] = {}
    async with open_store(url, create=True) as store:
        chat_id = f"hold-{uuid.uuid4().hex[:8]}"
        await store.create_chat(chat_id, USER, chat=chat_of(args.messages, chat_id))
        target = url.removeprefix("sqlite:///") if url.startswith("sqlite") else url
        saves: list[Any] = []
        before = loadavg()
        if writer_ms is None:
            await _claims_and_finals(store, chat_id, args.ops, probe, out)
        else:
            with competing_writer(target, chat_id, pause=writer_ms / 1000) as saves:
                await trio.sleep(0.5)  # the writer's own pace first
                await _claims_and_finals(store, chat_id, args.ops, probe, out)
            start, end = out["window"]
            inside = [s for s in saves if start <= s.start <= end]
            out["writer"] = {
                "saves": len(inside),
                "gave_up": sum(s.gave_up for s in inside),
                **{f"wait_{k}": v for k, v in _figures([s.wait * 1e3 for s in inside]).items()},
            }
        out["load"] = [before, loadavg()]
    return out


async def _claims_and_finals(store: Any, chat_id: str, ops: int, probe: LockProbe, out: dict) -> None:
    start = time.monotonic()
    for op in ("claim", "finalize"):
        since = time.monotonic()
        for r in range(ops):
            if op == "claim":
                await store.claim(chat_id, f"owc-{r}", run_id=f"run-{r}", writer="bench", alive=lambda w: True)
            else:
                await store.write(chat_id, f"owc-{r}", content="final text " * 50, output=FINAL_OUTPUT, done=True)
        out[op] = _figures([h.seconds * 1e3 for h in probe.since(since)])
    out["window"] = (start, time.monotonic())
    out["all"] = _figures([h.seconds * 1e3 for h in probe.since(start)])


async def case_stream(url: str, args: argparse.Namespace, probe: LockProbe) -> dict:
    """``--runs`` runs streaming at once through the real runtime, one per chat of ``--messages`` messages."""
    chats = chat_ids(f"stream{uuid.uuid4().hex[:6]}", args.runs)
    async with open_simulator(token=TOKEN) as sim, open_store(url, create=True) as store:
        for chat_id in chats:
            await store.create_chat(chat_id, USER, chat=chat_of(args.messages, chat_id))
        emitter = CountingEmitter()
        progress = lambda: sum(emitter.types.values())  # noqa: E731
        async with open_runtime(RuntimeConfig(url=sim.url, token=TOKEN), store, emitter) as runtime:
            await runtime.settled()
            before = loadavg()
            start = time.monotonic()
            runs = [sim.start_run(session_key(chat_id), f"stream-{k}") for k, chat_id in enumerate(chats)]
            every = max(1, args.deltas // max(1, args.tools))
            for i in range(args.deltas):
                for run in runs:
                    run.text(piece(i), chunks=[piece(i)])
                    if args.tools and (i + 1) % every == 0:
                        run.tool("exec", {"command": f"check {i}"}, "exit 0; " + "ok " * 40)
                await trio.sleep(args.pace_ms / 1000)
            for run in runs:
                run.end()
            ok = await until_progress(emitter.until, lambda: len(emitter.finished) >= args.runs, progress)
            end = time.monotonic()
    return {
        "ok": ok,
        "finished": len(emitter.finished),
        "seconds": end - start,
        "all": _figures([h.seconds * 1e3 for h in probe.since(start, end)]),
        "load": [before, loadavg()],
    }


def case_floor(url: str, args: argparse.Namespace) -> dict:
    """The database's own cost for a write of the same chat, no owc: ``--ops`` times each."""
    text = orjson.dumps(chat_of(args.messages, "floor")).decode()
    out: dict[str, Any] = {"bytes": len(text)}
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        db = sqlite3.connect(path, isolation_level=None, timeout=5)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "cache_size=-65536", "mmap_size=268435456"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, chat TEXT)")
        db.execute("INSERT OR REPLACE INTO floor VALUES (1, ?)", (text,))
        ms = []
        for i in range(args.ops):
            t = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE floor SET chat = ? WHERE id = 1", (text + " " * (i % 2),))
            db.execute("COMMIT")
            ms.append((time.perf_counter() - t) * 1e3)
        db.close()
        out["update"] = _figures(ms)
        return out
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as db:
        db.execute("SET default_toast_compression = 'lz4'")  # as owc's sessions (``engine.make_engine``)
        db.execute("CREATE TABLE IF NOT EXISTS floor (id int PRIMARY KEY, chat json, v int)")
        db.execute("INSERT INTO floor VALUES (1, %s::json, 0) ON CONFLICT (id) DO NOTHING", (text,))
        for label, sql, params in (
            ("update", "UPDATE floor SET chat = %s::json, v = %s WHERE id = 1", lambda i: (text, i)),
            ("fsync", "UPDATE floor SET v = %s WHERE id = 1", lambda i: (i,)),
        ):
            ms = []
            for i in range(args.ops):
                t = time.perf_counter()
                db.execute(sql, params(i))
                ms.append((time.perf_counter() - t) * 1e3)
            out[label] = _figures(ms)
        out["stored"] = db.execute("SELECT pg_column_size(chat) FROM floor WHERE id = 1").fetchone()[0]  # type: ignore[index]
    return out


async def backend(name: str, url: str, args: argparse.Namespace, probe: LockProbe) -> dict:
    rounds: dict[str, list[dict]] = {case: [] for case in args.only}
    for r in range(args.rounds):
        for case in args.only:
            log(f"{name} round {r + 1}/{args.rounds}: {case}")
            if case == "idle":
                rounds[case].append(await case_idle(url, args, probe))
            elif case == "writer":
                rounds[case].append(await case_idle(url, args, probe, writer_ms=args.writer_ms))
            elif case == "stream":
                rounds[case].append(await case_stream(url, args, probe))
            elif case == "floor":
                rounds[case].append(await trio.to_thread.run_sync(case_floor, url, args))
    return rounds


def _mm(rows: list[dict], *keys: str) -> str:
    values = []
    for row in rows:
        for key in keys:
            row = row.get(key, {}) if isinstance(row, dict) else {}
        values.append(row if isinstance(row, (int, float)) else float("nan"))
    return f"{low(values):7.2f} / {med(values):7.2f}"


def _load(rows: list[dict]) -> str:
    loads = [x for row in rows for x in (row.get("load") or [])]
    return "load " + ", ".join(f"{x[0]:.1f}" for x in loads) if loads else ""


def render(name: str, rounds: dict[str, list[dict]], args: argparse.Namespace, verdicts: list[str]) -> None:
    print(f"\n{name}: hold ms, min / median over {args.rounds} round(s)")
    print(f"  {'case':<34} {'n':>6} {'p50':>17} {'p99':>17} {'max':>17}")
    for case, rows in rounds.items():
        if not rows:
            continue
        if case == "floor":
            for label in ("update", "fsync"):
                if label in rows[0]:
                    what = {"update": "floor: bare UPDATE + commit", "fsync": "floor: one-row commit (fsync)"}[label]
                    print(
                        f"  {what:<34} {rows[0][label]['n']:>6} {_mm(rows, label, 'p50')} {_mm(rows, label, 'p99')}"
                        f" {_mm(rows, label, 'max')}"
                    )
            stored = f", stored {rows[0]['stored']:,} bytes" if "stored" in rows[0] else ""
            print(f"    (the chat is {rows[0]['bytes']:,} bytes of JSON{stored})")
            continue
        parts = ("claim", "finalize") if case in ("idle", "writer") else ("all",)
        for part in parts:
            label = f"{case} ({part})"
            n = rows[0].get(part, {}).get("n", 0)
            print(f"  {label:<34} {n:>6} {_mm(rows, part, 'p50')} {_mm(rows, part, 'p99')} {_mm(rows, part, 'max')}")
        if case == "stream":
            fin = ", ".join(f"{row['finished']}/{args.runs} in {row['seconds']:.1f} s" for row in rows)
            print(f"    runs finished: {fin}; {_load(rows)}")
        elif case == "writer":
            w = [row["writer"] for row in rows]
            print(
                f"    Open WebUI writer every {args.writer_ms} ms: saves {', '.join(str(x['saves']) for x in w)}; "
                f"give-ups {sum(x['gave_up'] for x in w)}; wait p50 {_mm(w, 'wait_p50')} p99 {_mm(w, 'wait_p99')} "
                f"max {_mm(w, 'wait_max')}; {_load(rows)}"
            )
            if name.startswith("PostgreSQL"):
                print("    (PostgreSQL: owc's hold here includes any wait for the writer's row lock)")
        else:
            print(f"    {_load(rows)}")
        for part in parts:
            p99 = med([row.get(part, {}).get("p99", float("nan")) for row in rows])
            verdict = "PASS" if p99 < 10 else "FAIL"
            verdicts.append(f"{verdict}  {name}: hold p99 < 10 ms, {case} ({part}): {p99:.2f} ms (median over rounds)")
        if case == "writer":
            wait = med([row["writer"]["wait_p99"] for row in rows])
            gave = sum(row["writer"]["gave_up"] for row in rows)
            verdict = "PASS" if wait < 100 and gave == 0 else "FAIL"
            verdicts.append(f"{verdict}  {name}: writer wait p99 < 100 ms, 0 give-ups: {wait:.2f} ms, {gave} give-ups")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--messages", type=int, default=1000, help="messages in each chat (default 1,000)")
    p.add_argument("--ops", type=int, default=100, help="claims and finalizes per idle/writer case and floor")
    p.add_argument("--runs", type=int, default=100, help="runs streaming at once (default 100)")
    p.add_argument("--deltas", type=int, default=40)
    p.add_argument("--tools", type=int, default=4)
    p.add_argument("--pace-ms", type=float, default=20.0, help="between rounds of deltas (every run gets one)")
    p.add_argument("--writer-ms", type=float, default=2.0, help="the competing writer's pause between saves")
    p.add_argument("--only", default="floor,idle,stream,writer")
    p.add_argument("--no-postgres", action="store_true")
    p.add_argument("--no-sqlite", action="store_true")
    args = p.parse_args(argv)
    args.only = [c for c in args.only.split(",") if c]
    return args


async def amain(args: argparse.Namespace) -> None:
    probe = LockProbe().install()
    verdicts: list[str] = []
    print(f"holds_contended: {uptime()}")
    print(
        f"  {args.messages:,} messages a chat; {args.ops} claims + {args.ops} finalizes; {args.runs} runs x "
        f"{args.deltas} deltas x {args.tools} tools, {args.pace_ms:g} ms pace; writer every {args.writer_ms:g} ms"
    )
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory(prefix="holds") as tmp:
            print(f"  SQLite in {_filesystem(tmp)}")
            render("SQLite", await backend("SQLite", f"sqlite:///{tmp}/holds.db", args, probe), args, verdicts)
    if not args.no_postgres:
        try:
            server, shown = await trio.to_thread.run_sync(start_durable_postgres)
        except Exception as exc:  # a machine without PostgreSQL: said, not failed
            print(f"\nPostgreSQL: skipped ({type(exc).__name__}: {str(exc)[:200]})")
        else:
            try:
                settings = ", ".join(f"{k}={shown.get(k)}" for k in PG_DURABLE)
                print(f"\nPostgreSQL {shown.get('version')} on {shown.get('data')}: {settings}")
                rounds = await backend("PostgreSQL", server.url, args, probe)
                render("PostgreSQL (durable)", rounds, args, verdicts)
            finally:
                await trio.to_thread.run_sync(server.stop)
    print("\nGoals (issue 32, goal 3; printed, never asserted)")
    for line in verdicts:
        print(f"  {line}")
    print(f"\n{uptime()}")


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    trio.run(amain, parse(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
