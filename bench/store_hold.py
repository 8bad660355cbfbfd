"""Transaction hold time and wall time of claim and finalize, by chat size, on SQLite and PostgreSQL.

Each write is one row-locked transaction that reads the chat JSON, changes it and writes it back, so its cost
grows with the chat. Open WebUI's own writers give up after waiting 5 s for that lock: these figures say how
far from that owc stays. Hold = from the locked read to the commit; wall = the whole call.

    python bench/store_hold.py [--sizes 10,100,1000,5000] [--reps 30] [--postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from owc.store import ChatStore, make_engine

#: What every finalize writes, the same at every size: only the chat around it grows.
FINAL_OUTPUT = [{"type": "message", "id": "msg_x", "content": [{"type": "output_text", "text": "final"}]}]


def chat_of(size: int, chat_id: str) -> dict:
    messages = {}
    parent = None
    text = "word " * 80  # ~400 chars a message, a typical chat turn
    for i in range(size):
        mid = f"m{i}"
        role = "user" if i % 2 == 0 else "assistant"
        messages[mid] = {
            "id": mid,
            "parentId": parent,
            "childrenIds": [],
            "role": role,
            "content": text,
            "timestamp": i,
            "done": True,
        }
        if parent:
            messages[parent]["childrenIds"].append(mid)
        parent = mid
    history = {"messages": messages, "currentId": parent}
    return {"id": chat_id, "title": "bench", "models": ["openclaw"], "history": history, "messages": []}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(url: str, sizes: list[int], reps: int) -> list[tuple]:
    holds: list[float] = []
    store = ChatStore(make_engine(url), on_hold=lambda _chat, s: holds.append(s))
    store.create_tables()
    rows = []
    for size in sizes:
        chat_id = f"bench-{size}-{time.time_ns()}"
        store.create_chat(chat_id, "u", chat=chat_of(size, chat_id))
        for op in ("claim", "finalize"):
            holds.clear()
            walls = []
            for r in range(reps):
                mid = f"owc-{r}"
                start = time.perf_counter()
                if op == "claim":
                    store.claim(chat_id, mid, run_id=f"run-{r}", writer="bench", alive=lambda w: True, user_id="u")
                else:
                    store.write(chat_id, mid, content="final text " * 50, output=FINAL_OUTPUT, done=True)
                walls.append(time.perf_counter() - start)
            hold_ms, wall_ms = [h * 1e3 for h in holds], [w * 1e3 for w in walls]
            rows.append(
                (
                    size,
                    op,
                    statistics.median(hold_ms),
                    pct(hold_ms, 0.99),
                    statistics.median(wall_ms),
                    pct(wall_ms, 0.99),
                )
            )
    store.engine.dispose()
    return rows


def report(name: str, rows: list[tuple]) -> None:
    print(f"\n{name}")
    columns = ("hold med ms", "hold p99 ms", "wall med ms", "wall p99 ms")
    print(f"{'messages':>9} {'op':>9} " + " ".join(f"{c:>12}" for c in columns) + f" {'growth':>8}")
    base: dict[str, float] = {}
    for size, op, hm, hp, wm, wp in rows:
        base.setdefault(op, hm)
        print(f"{size:>9} {op:>9} {hm:>12.2f} {hp:>12.2f} {wm:>12.2f} {wp:>12.2f} {hm / base[op]:>7.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000,5000")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--postgres", action="store_true", help="also start a PostgreSQL server (tests/pgserver.py)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        report("SQLite (WAL, file)", measure(f"sqlite:///{tmp}/bench.db", sizes, args.reps))
    if args.postgres:
        from pgserver import start_postgres

        server = start_postgres()
        try:
            report("PostgreSQL", measure(server.url, sizes, args.reps))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
