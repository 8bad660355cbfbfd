"""Where the connection's active-run tracker used to live: it is part of the connection's sans-I/O state now
(``owc.protocol.active``, used by ``owc.protocol.machine``). Kept so existing imports go on working. Pure."""

from owc.protocol.active import FINISHED_CAP, ActiveRuns, Resync, RunKey

__all__ = ["FINISHED_CAP", "ActiveRuns", "Resync", "RunKey"]
