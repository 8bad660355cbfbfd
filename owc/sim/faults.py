"""Faults a test or a scenario injects into live connections: lost events, slow consumers, a hung or silent
server, hostile frames and cut sockets. Each only flips a ``SimConn``'s delivery state (or queues a frame),
so the fault takes effect at the next frame, in order with everything else on that connection."""

from __future__ import annotations

from owc.sim.delivery import Fanout, SimConn


class Faults:
    def __init__(self, fanout: Fanout) -> None:
        self._fanout = fanout

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
        whose transcript store fails); ``fail_requests()`` with no method heals it."""
        for c in self._targets(conn):
            c.failing = frozenset(methods)

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
