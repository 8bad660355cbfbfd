"""Faults a test or a scenario injects into live connections: lost events, slow consumers, a hung or silent
server, hostile frames and cut sockets. Each only flips a ``SimConn``'s delivery state (or queues a frame),
so the fault takes effect at the next frame, in order with everything else on that connection."""

from __future__ import annotations

from collections.abc import Callable

import trio

from owc.protocol import Request
from owc.sim.delivery import Fanout, SimConn


class Faults:
    def __init__(
        self,
        fanout: Fanout,
        *,
        nursery: trio.Nursery | None = None,
        answer: Callable[[SimConn, Request], None] | None = None,
    ) -> None:
        self._fanout = fanout
        self._nursery = nursery
        self._answer = answer
        self._stall_seconds: dict[str, float] = {}  # conn id -> how long each held request waits

    def connection(self, name: str | None = None) -> SimConn:
        """A live connection by conn id or ``client.instanceId``; the only one if ``name`` is None."""
        live = [c for c in self._fanout.conns.values() if not c.closing]
        if name is None:
            if len(live) != 1:
                raise LookupError(f"{len(live)} live connections; name one")
            return live[0]
        for conn in live:
            if name in (conn.conn_id, conn.instance_id):
                return conn
        raise LookupError(f"no live connection {name!r}")

    def _targets(self, name: str | None) -> list[SimConn]:
        if name is None:
            return [c for c in self._fanout.conns.values() if not c.closing]
        return [self.connection(name)]

    def drop(self, count: int, conn: str | None = None) -> None:
        """Drop the next ``count`` drop-if-slow events to a connection (every live one if None); each still
        spends its seq number, so the client sees a gap."""
        for c in self._targets(conn):
            c.drop_next += count

    def slow_consumer(self, conn: str | None = None) -> None:
        """Make a connection a slow consumer: its drop-if-slow events are dropped (seq spent) and the first
        event that may not be dropped closes it with 1008 "slow consumer"."""
        for c in self._targets(conn):
            c.slow = True

    def stall_replies(self, conn: str | None = None) -> None:
        """The connection's requests are read and never answered: a hung server."""
        for c in self._targets(conn):
            c.stalled = True

    def fail_requests(self, *methods: str, conn: str | None = None) -> None:
        """The connection's requests of these methods are answered with an ``UNAVAILABLE`` error (a Gateway
        whose transcript store fails); ``fail_requests()`` with no method heals it, and releases what a stall
        holds."""
        for c in self._targets(conn):
            c.failing = frozenset(methods)
            if not methods:
                self._release(c)

    def stall_requests(self, *methods: str, conn: str | None = None, seconds: float | None = None) -> None:
        """The connection's requests of these methods are held unanswered (a Gateway whose transcript store is
        slow): until ``fail_requests()`` heals the connection or, with ``seconds``, each for that long on
        Trio's clock. The reply is built when it is sent, from the state then."""
        for c in self._targets(conn):
            c.stalling = frozenset(methods)
            if seconds is None:
                self._stall_seconds.pop(c.conn_id, None)
            else:
                self._stall_seconds[c.conn_id] = seconds

    def hold(self, conn: SimConn, frame: Request) -> None:
        """A request of a stalled method arrived: keep it (``Rpc`` calls this)."""
        conn.held.append(frame)
        seconds = self._stall_seconds.get(conn.conn_id)
        if seconds is not None and self._nursery is not None:
            self._nursery.start_soon(self._release_after, conn, frame, seconds)

    async def _release_after(self, conn: SimConn, frame: Request, seconds: float) -> None:
        await trio.sleep(seconds)  # the stall's own length, a fault the scenario asked for
        if any(f is frame for f in conn.held):
            conn.held = [f for f in conn.held if f is not frame]
            if self._answer is not None:
                self._answer(conn, frame)

    def _release(self, conn: SimConn) -> None:
        conn.stalling = frozenset()
        held, conn.held = conn.held, []
        for frame in held:
            if self._answer is not None:
                self._answer(conn, frame)

    def mute(self, conn: str | None = None) -> None:
        """Nothing more reaches the connection, ticks included, and the socket stays open: a half-open
        TCP connection, which only the client's liveness check can detect."""
        for c in self._targets(conn):
            c.muted = True

    def inject(self, text: str | bytes, conn: str | None = None) -> None:
        """Send raw text to a connection as one message: a hostile or broken server."""
        for c in self._targets(conn):
            assert c.send is not None
            c.send.send_nowait(text.decode() if isinstance(text, bytes) else text)

    def disconnect(self, conn: str | None = None) -> None:
        """Cut a connection's TCP stream (the client sees 1006); the Gateway keeps running, same boot id."""
        for c in self._targets(conn):
            self._fanout.abort(c)
