"""Gateway restarts: the four modes of seed 000 section 2.7 F3, and restart recovery at boot (F1, F2).

A restart is the one operation that touches everything: it ends or cuts the active runs, closes every
connection, forgets the in-memory queues and the playing scripts, and boots with a new boot id; the rows it
left ``running`` are then recovered by new runs whose user turn carries the restart-recovery provenance.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from owc.sim import model as m
from owc.sim.delivery import Fanout, everyone
from owc.sim.questions import Questions
from owc.sim.runs import RunDriver
from owc.sim.script import End, RecoveryScript, Step

RESTART_MODES = ("restart", "stop", "container", "crash")
RECOVERY_PROMPT = "The gateway restarted while this turn was running. Continue the interrupted turn."


@attrs.frozen
class PlannedRecovery:
    """How the Gateway will recover one session at a coming boot: the recovery run's id and its steps (None:
    the caller drives it step by step, as a scenario does); the default is a fresh id and ``recovery``'s steps."""

    run_id: str
    steps: Sequence[Step] | None


#: The shortest boot (Trio's clock): the new process starts strictly after the old one's last write, so a row the
#: old one settled is dated before the boot (``owc.rules.owner.settled_before_boot``), as on a real host.
BOOT_SECONDS = 0.002


@attrs.define
class Boot:
    """The running process's identity: ``boot_id`` changes on every boot (owc reads it from hello-ok);
    while ``starting`` a ``connect`` is refused with UNAVAILABLE / 1013."""

    boot_id: str = attrs.field(factory=lambda: str(uuid.uuid4()))
    boots: int = 1
    starting: bool = False
    #: When this boot began, on the Gateway's clock (``now_ms``): hello-ok's ``snapshot.uptimeMs`` counts from it,
    #: as the real Gateway's does from its process start. In whole milliseconds of the one clock, so the challenge's
    #: ``ts`` less the uptime is never later than the boot (a difference of two truncated float times could be).
    started_ms: int = 0


class Restarts:
    def __init__(
        self,
        fanout: Fanout,
        driver: RunDriver,
        boot: Boot,
        *,
        recovery: RecoveryScript,
        notify: Callable[[], Awaitable[None]],
        questions: Questions,
    ) -> None:
        self._fanout = fanout
        self._questions = questions
        self._driver = driver
        self._boot = boot
        self.recovery = recovery
        self._notify = notify
        #: session key -> the recoveries planned for it, used one per boot that recovers the session.
        self.planned: dict[str, list[PlannedRecovery]] = {}
        #: session key -> the run a restart interrupted there (the one its boot's recovery continues).
        self._interrupted: dict[str, str] = {}
        #: session keys whose recovery the next boots leave pending (``hold_recovery``).
        self.holding: set[str] = set()
        #: Boots whose recoveries wait for their ``recovery_delay`` (the simulator is not quiescent meanwhile).
        self.pending = 0
        self._delayed: list[tuple[m.AgentSession, str | None]] = []  # the recoveries a boot has yet to start
        driver.admitting = self._admitting

    def give_up_recovery(
        self, key: str, error: str = "restart recovery failed 3 times: the session is tombstoned"
    ) -> None:
        """The Gateway's recovery of ``key`` (booted, its row still ``running`` for the recovery, nothing active)
        fails before its agent starts, attempt after attempt, until its budget of three charged attempts is spent
        and the session is tombstoned (seed 004, "Automatic resume": recovery starts "a few seconds after startup";
        "After the durable budget is exhausted, the session is tombstoned"). The boot must not recover ``key``
        itself: call ``hold_recovery`` before the restart. Modelled, not measured: no attempt shows a run to
        clients; the row ends ``failed`` with the error, naming the last attempt's fresh run id (each attempt "uses
        a fresh run ID"), and is pushed."""
        session = self._driver.sessions[key]
        if session.status != "running" or session.active is not None:
            raise RuntimeError(f"session {key} has no recovery pending")
        self.holding.discard(key)
        self._interrupted.pop(key, None)
        session.status, session.last_run_error = "failed", error
        session.last_run_id = f"recovery-{uuid.uuid4().hex[:12]}"  # the last attempt's fresh run id
        session.aborted_last_run = False
        session.updated_at = self._driver.now_ms()
        self._fanout.sessions_changed(session, reason="recovery.failed")

    def hold_recovery(self, key: str) -> None:
        """The next boot leaves ``key``'s recovery pending (its row ``running``, ``abortedLastRun``) instead of starting
        it at once: the Gateway dispatches recoveries a few seconds after startup (seed 004), so a client can be
        back first. ``give_up_recovery`` then ends it."""
        self.holding.add(key)

    def plan_recovery(self, key: str, run_id: str, steps: Sequence[Step] | None) -> None:
        """The next boot that recovers ``key`` does it with this run (id, steps) instead of the default."""
        self.planned.setdefault(key, []).append(PlannedRecovery(run_id, steps))

    async def restart(self, mode: str, *, down_seconds: float = 0.0, recovery_delay: float = 0.0) -> None:
        """Stop and boot the Gateway again in one of the four modes of seed 000 section 2.7 F3.

        * ``restart``: ``shutdown`` with ``restartExpectedMs``; active runs are cut with no chat terminal and no
          lifecycle end (an empty aborted assistant message in the transcript) and their rows stay ``running`` +
          ``abortedLastRun``; recovery runs at boot (measured on 2026.9.6: a forced restart).
        * ``stop``: ``shutdown`` without ``restartExpectedMs``; a run still active when the drain runs out is
          aborted with stopReason ``restart`` and its row stays ``running``: recovered at the next boot, like a
          restart (measured on 2026.9.6; the seeds' "killed after a stop notice" does not occur there).
        * ``container``: the CLI child exits 143 first: rows ``failed`` with ``Claude Code process exited with
          code 143``; then the shutdown notice and the close; no recovery.
        * ``crash``: no terminal, no notice, connections cut (1006); rows stay ``running``; recovery at boot.

        Every mode closes every connection (1012 after a notice) and boots with a new boot id, and loses every
        question (pending or not: the question manager is process-local; the asking run is cut as above). While
        ``down_seconds`` run (Trio's clock; at least ``BOOT_SECONDS``: a process never starts in no time, and the
        boot's clock, ``snapshot.uptimeMs``, begins after the last write of the process before it) a ``connect`` is
        refused with UNAVAILABLE / 1013, as the real Gateway refuses one while it starts (measured).

        ``recovery_delay``: the boot's recoveries start that long after the boot (Trio's clock; the real Gateway
        starts them 2-4 s after ``ready``, measured). Which sessions it recovers is decided at the boot (the rows
        still ``running`` then); a run admitted to such a session in between starts that session's recovery at once
        and queues behind it (``_admitting``), as on the real Gateway.
        """
        if mode not in RESTART_MODES:
            raise ValueError(f"unknown restart mode {mode!r}; one of {RESTART_MODES}")
        fanout, driver, boot = self._fanout, self._driver, self._boot
        for session, source in self._delayed:  # a boot that had not started its recoveries yet: they are owed still
            if source is not None:
                self._interrupted.setdefault(session.key, source)
        self._delayed = []
        if mode == "container":
            # The whole container goes down: its queues die with the Gateway's process (no queued run begins), and
            # every CLI child exits 143: every row keeps its error and nothing is recovered (measured on 2026.9.6).
            for session in driver.sessions.values():
                driver.cancel_queued(session)
            for run in [s.active for s in driver.sessions.values() if s.active is not None]:
                run.cut_by = mode
                driver.end(run, End("error", error=m.CONTAINER_STOP_ERROR))
        if mode != "crash":
            notice: dict[str, Any] = {"reason": "gateway restarting" if mode == "restart" else "gateway stopping"}
            if mode == "restart":
                notice["restartExpectedMs"] = 1500
            fanout.emit("shutdown", notice, audience=everyone, drop_if_slow=False)
        for run in [s.active for s in driver.sessions.values() if s.active is not None]:
            self._interrupted[run.key] = run.run_id  # what a recovery at boot continues (a crash persists no end)
            run.cut_by = mode
            if mode == "restart":
                driver.interrupt_for_restart(run)
            elif mode == "stop":
                driver.end(run, End("aborted", stop_reason="restart"))
            else:  # crash: the process dies under it
                driver.cut(run)
        self._questions.lose_all()  # process-local: every question dies with the process
        for conn in list(fanout.conns.values()):
            if mode == "crash":
                fanout.abort(conn)
            else:
                fanout.close(conn, 1012, "service restart")
        for scope in list(driver.plays.values()):
            scope.cancel()
        for session in driver.sessions.values():
            driver.cancel_queued(session)  # in-memory queues die with the process
        boot.boot_id = str(uuid.uuid4())
        boot.boots += 1
        down_seconds = max(down_seconds, BOOT_SECONDS)
        if down_seconds > 0:
            boot.starting = True
            await self._notify()
            await trio.sleep(down_seconds)
            boot.starting = False
        boot.started_ms = self._driver.now_ms()
        due = self._due()
        if recovery_delay > 0 and due:
            self.pending += 1
            self._delayed = due
            self._driver.spawn(self._recover_later, due, boot.boot_id, recovery_delay)
        else:
            self._boot_recovery(due)
        await self._notify()

    def _admitting(self, key: str) -> None:
        """A run is being admitted to ``key`` (not a heartbeat's, not a recovery): if this boot's recovery of the
        session is still pending (``recovery_delay``), it starts now and the admitted run queues behind it. The real
        Gateway 2026.9.6 does this: a reply admitted on a row ``running`` with ``abortedLastRun`` (the boot marked
        it) dispatches the pending recovery itself and waits for it before it runs (``get-reply.types-*.mjs``:
        ``retryRestartAbortedMainSessionRecovery``, ``waitForRecovery``; measured by
        ``tests/test_realgw_cuts.py::test_a_turn_sent_before_the_boots_recovery_begins_runs_after_the_recovery``).
        Before, the admitted run went first and the recovery queued behind it: a session's last run after a boot
        could be an ordinary turn with the boot's recovery still to come, which no Gateway does (fuzz seed 30151)."""
        due = [(session, source) for session, source in self._delayed if session.key == key]
        if not due:
            return
        self._delayed[:] = [(session, source) for session, source in self._delayed if session.key != key]
        self._boot_recovery(due)

    def _due(self) -> list[tuple[m.AgentSession, str | None]]:
        """The sessions a boot recovers (rows still ``running``, no run active: F1) and the run each continues."""
        due = []
        for session in list(self._driver.sessions.values()):
            if session.status != "running" or session.active is not None:
                continue
            session.aborted_last_run = True  # markStartupOrphanedMainSessionsForRecovery
            if session.key in self.holding:
                continue  # pending (``hold_recovery``): the caller gives it up or recovers it
            due.append((session, self._interrupted.pop(session.key, None) or session.last_run_id or None))
        return due

    async def _recover_later(self, due: list[tuple[m.AgentSession, str | None]], boot_id: str, delay: float) -> None:
        try:
            await trio.sleep(delay)
            if self._boot.boot_id == boot_id:  # a later restart's boot decides for itself
                self._delayed = []
                self._boot_recovery(due)
        finally:
            self.pending -= 1
            await self._notify()

    def _boot_recovery(self, due: list[tuple[m.AgentSession, str | None]]) -> None:
        """At boot the Gateway recovers rows still ``running`` (F1): a new run per session whose user turn
        carries the restart-recovery provenance (queued behind a run that began there since the boot)."""
        for session, source in due:
            planned = self.planned.get(session.key)
            plan = planned.pop(0) if planned else None
            if planned == []:
                del self.planned[session.key]
            recovery = self._driver.start_run(
                session.key,
                plan.run_id if plan is not None else None,
                origin="recovery",
                user_text=RECOVERY_PROMPT,
                provenance=dict(m.RECOVERY_PROVENANCE),
                steps=plan.steps if plan is not None else self.recovery(session.key, source),
            )
            recovery.run.recovers = source
