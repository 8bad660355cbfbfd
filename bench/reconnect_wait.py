"""How long a person watching a reply waits for owc after the Gateway is back (issue 25, item 7).

Two parts:

* ``--table`` (default): the reconnect schedule alone, for outages of 2 s to 10 min: the wait between the Gateway
  answering again and owc's next attempt, for the old schedule (1 s doubling to 30 s) and the current one
  (``owc.gateway.backoff.Backoff``: a 4 s cap until 120 s of waiting, then on to 30 s). Without jitter (exact), and
  the mean and worst over 2,000 jittered draws. Pure arithmetic on the schedule: what ``GatewayClient.run`` waits.
* ``--real``: the real OpenClaw Gateway 2026.9.6 (the real-Gateway tier's install, offline on loopback): owc
  connected with the schedule under test, the Gateway killed (SIGKILL) and launched again on the same port, and
  the times measured from the kill: the Gateway's ``ready`` line, owc's next hello-ok, and the wait between them.

    python3 bench/reconnect_wait.py
    python3 bench/reconnect_wait.py --real --rounds 2
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from owc.gateway.backoff import Backoff  # noqa: E402

OLD = {"watch_cap": 30.0}  # the schedule before issue 25: one cap, 30 s
NEW: dict[str, float] = {}  # the defaults


def attempt_times(
    schedule: dict[str, float], horizon: float, rng: random.Random | None, attempt_s: float
) -> list[float]:
    """When each attempt starts, from the drop (time 0: the first attempt fails at once, as against a Gateway that
    is down), until past ``horizon``. ``attempt_s``: how long a failed attempt takes (a refused TCP connect: ~0)."""
    backoff = Backoff(jitter=0.2 if rng else 0.0, rng=rng or random.Random(0), **schedule)
    times, now = [0.0], 0.0
    while now <= horizon:
        now += attempt_s + backoff.next_delay()
        times.append(now)
    return times


def wait_after(outage: float, times: list[float]) -> float:
    """The wait from the Gateway's return (``outage`` s after the drop) to owc's first attempt after it."""
    return next(t for t in times if t >= outage) - outage


def table() -> None:
    outages = [2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600]
    rngs = [random.Random(seed) for seed in range(2000)]
    print("outage s | old exact | old mean | old worst | new exact | new mean | new worst")
    for outage in outages:
        row = [f"{outage:8d}"]
        for schedule in (OLD, NEW):
            exact = wait_after(outage, attempt_times(schedule, outage + 60, None, 0.0))
            drawn = [wait_after(outage, attempt_times(schedule, outage + 60, rng, 0.0)) for rng in rngs]
            row += [f"{exact:9.1f}", f"{statistics.mean(drawn):8.1f}", f"{max(drawn):9.1f}"]
        print(" | ".join(row))
    for name, schedule in (("old", OLD), ("new", NEW)):
        times = attempt_times(schedule, 600, None, 0.0)
        per_10min = sum(1 for t in times if t <= 600)
        print(f"{name}: {per_10min} attempts in the first 10 min of an outage; first delays {_delays(schedule)}")


def _delays(schedule: dict[str, float]) -> list[float]:
    backoff = Backoff(jitter=0.0, **schedule)
    return [backoff.next_delay() for _ in range(36)]


def real(rounds: int) -> None:
    import trio

    from owc.gateway import GatewayClient, GatewayConfig

    from realgw.gateway import ensure_installed, start_cuttable

    install = ensure_installed()
    gw = start_cuttable(install)
    try:
        for name, schedule in (("old", OLD), ("new", NEW)):
            for round_ in range(rounds):
                watch_cap = schedule.get("watch_cap", 4.0)

                async def measure(watch_cap: float = watch_cap) -> tuple[float, float, int]:
                    config = GatewayConfig(instance_id="owc-bench", backoff_watch_cap=watch_cap)
                    client = GatewayClient(gw.url, gw.token, config=config)
                    back: list[float] = []
                    answered = trio.Event()

                    async def prober(killed: float) -> None:
                        """When the Gateway first answers a handshake with hello-ok again: a probe every 0.2 s."""
                        probe = GatewayClient(gw.url, gw.token, config=GatewayConfig(instance_id="owc-probe"))
                        while True:
                            try:
                                await probe.probe()
                            except Exception:
                                await trio.sleep(0.2)  # timer-ok: a bench's probe interval
                                continue
                            back.append(time.monotonic() - killed)  # timer-ok: measurement
                            answered.set()
                            return

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(client.run)
                        first = await client.wait_connection()
                        killed = time.monotonic()  # timer-ok: a bench's measurement of real time
                        gw.signal_group(9)
                        await trio.to_thread.run_sync(gw.wait_exit)
                        gw.launch()
                        nursery.start_soon(prober, killed)
                        await client.wait_connection(newer_than=first)
                        hello_after = time.monotonic() - killed  # timer-ok: measurement
                        await answered.wait()
                        await trio.to_thread.run_sync(gw.wait_ready)
                        nursery.cancel_scope.cancel()
                    return back[0], hello_after, client.attempts

                back_s, hello_s, attempts = trio.run(measure)
                print(
                    f"{name} round {round_ + 1}: the Gateway answered hello-ok again {back_s:.1f} s after the kill"
                    f" (a probe every 0.2 s), owc's hello {hello_s:.1f} s after it: owc came"
                    f" {hello_s - back_s:+.1f} s after the Gateway was back ({attempts} attempts)",
                    flush=True,
                )
    finally:
        gw.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", action="store_true", help="measure against the real Gateway too")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    table()
    if args.real:
        real(args.rounds)


if __name__ == "__main__":
    main()
