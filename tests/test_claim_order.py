"""Runs on one chat chain in run-start order, whatever order their claims reach the database lock (issue 11).

Claims run in worker threads, and SQLite's busy wait is not first-come, first-served: without an order of its
own, a later run whose claim took the lock first would sit above an earlier one."""

from __future__ import annotations

import trio
import trio.testing

from owc import ids

from harness import open_env


def chain(messages: dict, tail: str) -> list[str]:
    """Message ids from the root to ``tail``."""
    out: list[str] = []
    m = messages.get(tail)
    while m is not None:
        out.append(m["id"])
        m = messages.get(m.get("parentId"))
    return out[::-1]


def hold_claim(env, held: str) -> tuple[trio.Event, list[str]]:
    """Hold the store's claim of message ``held`` until the returned event is set; the list records every message
    a claim was asked for, in order."""
    real_claim = env.store.claim
    release = trio.Event()
    asked: list[str] = []

    async def claim(chat, message_id, **kwargs):
        asked.append(message_id)
        if message_id == held:
            await release.wait()
        return await real_claim(chat, message_id, **kwargs)

    env.store.claim = claim
    return release, asked


async def test_a_later_runs_claim_never_overtakes_an_earlier_ones(tmp_path, clock) -> None:
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        await env.connect()
        first = ids.message_id(key, "first")
        release, asked = hold_claim(env, first)  # the first run's claim loses the race for the lock
        env.sim.start_run(key, "first").text("One.").end()
        env.sim.start_run(key, "second").text("Two.").end()
        env.sim.start_run(key, "third").text("Three.").end()
        await env.sim.wait_for(env.sim.quiescent)
        await trio.testing.wait_all_tasks_blocked()
        names = {ids.message_id(key, r): r for r in ("first", "second", "third")}
        assert [names[m] for m in asked] == ["first"]  # the later runs wait their turn instead of taking the lock
        release.set()
        await env.settled()
        messages = await env.messages(chat_id)
        order = [ids.message_id(key, r) for r in ("first", "second", "third")]
        assert chain(messages, order[-1]) == ["u1", *order]
        assert all(messages[m]["done"] for m in order)


async def test_each_chat_keeps_its_own_order_and_others_are_not_held(tmp_path, clock) -> None:
    """The wait is per chat: a claim held on one chat does not delay another chat's runs."""
    async with open_env(tmp_path) as env:
        chat_a, key_a = await env.chat()
        chat_b, key_b = await env.chat()
        await env.connect()
        held = ids.message_id(key_a, "a1")
        real_claim = env.store.claim
        release = trio.Event()

        async def slow_claim(chat, message_id, **kwargs):
            if message_id == held:
                await release.wait()
            return await real_claim(chat, message_id, **kwargs)

        env.store.claim = slow_claim
        env.sim.start_run(key_a, "a1").text("A one.").end()
        env.sim.start_run(key_a, "a2").text("A two.").end()
        env.sim.start_run(key_b, "b1").text("B one.").end()
        env.sim.start_run(key_b, "b2").text("B two.").end()
        await env.sim.wait_for(env.sim.quiescent)
        ledger = env.keepers["A"].ledger
        await env.keepers["A"].until(lambda: ledger.is_settled(key_b, "b2"))
        b = await env.messages(chat_b)
        assert chain(b, ids.message_id(key_b, "b2")) == ["u1", ids.message_id(key_b, "b1"), ids.message_id(key_b, "b2")]
        assert ids.message_id(key_a, "a2") not in await env.messages(chat_a)
        release.set()
        await env.settled()
        a = await env.messages(chat_a)
        assert chain(a, ids.message_id(key_a, "a2")) == ["u1", held, ids.message_id(key_a, "a2")]


def _blocker_by_full_scan(ledger, run, carried):
    """The claim-order rule read straight off every run of the ledger (the oracle for ``Ledger.claim_blocker``,
    which looks only at its per-chat index of claiming runs)."""
    from owc.rules.lifecycle import State

    for other in ledger.runs.values():
        if (
            other is not run
            and (
                not run.standing.reconciled
                or other.standing.reconciled
                or other.key in carried
                or other.standing.rank == 0
            )
            and other.ref.chat_id == run.ref.chat_id
            and other.place < run.place
            and other.life.state in (State.CLAIMING, State.CHECKING)
            and other.writer_live
            and not other.read.check_waits
            and not other.cont.linking
        ):
            return other
    return None


async def test_many_runs_starting_together_on_one_chat_claim_in_order(tmp_path, clock) -> None:
    """Forty runs begin at once on one chat while the first one's claim is held: each claims after the one
    before it, every answer of the ledger's indexed ``claim_blocker`` agrees with a scan of every run (whether
    some run blocks), and nothing is left in the index once all are settled."""
    async with open_env(tmp_path) as env:
        chat_id, key = await env.chat()
        keeper = await env.connect()
        names = [f"r{i:02d}" for i in range(40)]
        first = ids.message_id(key, names[0])
        release, asked = hold_claim(env, first)
        ledger = keeper.ledger
        indexed = ledger.claim_blocker
        answers = {"blocked": 0, "free": 0}

        def checked(run, carried=frozenset()):
            got = indexed(run, carried)
            want = _blocker_by_full_scan(ledger, run, carried)
            assert (got is None) == (want is None), (run.run_id, got, want)
            answers["free" if got is None else "blocked"] += 1
            return got

        ledger.claim_blocker = checked
        for name in names:
            env.sim.start_run(key, name).text(f"{name}.").end()
        await env.sim.wait_for(env.sim.quiescent)
        await trio.testing.wait_all_tasks_blocked()
        assert asked == [first]
        release.set()
        await env.settled()
        messages = await env.messages(chat_id)
        order = [ids.message_id(key, n) for n in names]
        assert chain(messages, order[-1]) == ["u1", *order]
        assert all(messages[m]["done"] for m in order)
        assert answers["blocked"] > 0 and answers["free"] >= len(names) - 1, answers
        assert ledger._claiming == {}
