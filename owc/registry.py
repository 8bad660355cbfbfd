"""The process-wide writer registry: the one piece of global mutable state owc has (seed 000 section 2.3).

Every live connection session of this process registers its writer id, ``<process id>/<session id>``, and a
claim records it in the message (``meta.openclaw_writer``). What a claim may conclude from a recorded writer:

* registered here: a live connection of this process writes the message; back off;
* of this process but not registered: its connection has closed; take the message over at once;
* of another process (or an id without this process's prefix): this process cannot see whether it lives.
  While the run is live, back off and stand by, so two processes never both stream one message to the tabs;
  at the run's own terminal, finish the message if it is still not done (the finalize is idempotent: both
  read the same transcript), so a process that died mid-run loses no turn. No timer or lease is involved.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager


class WriterRegistry:
    def __init__(self, process_id: str | None = None) -> None:
        #: Distinguishes this process's writers from other processes' in a shared database.
        self.process_id = process_id or uuid.uuid4().hex
        self._live: set[str] = set()

    def writer_id(self, session_id: str) -> str:
        """The writer id a connection session records in the messages it claims."""
        return f"{self.process_id}/{session_id}"

    def is_local(self, writer_id: str | None) -> bool:
        return writer_id is not None and writer_id.startswith(f"{self.process_id}/")

    def is_alive(self, writer_id: str | None) -> bool:
        """Known alive: a live connection of this process."""
        return writer_id is not None and writer_id in self._live

    def may_be_alive(self, writer_id: str | None) -> bool:
        """Not known dead: alive here, or another process's writer (whose liveness this process cannot see)."""
        return writer_id is not None and (writer_id in self._live or not self.is_local(writer_id))

    def live(self) -> tuple[str, ...]:
        """The writer ids registered live now, sorted (the operator's view: one per open connection)."""
        return tuple(sorted(self._live))

    @contextmanager
    def registered(self, writer_id: str) -> Iterator[str]:
        self._live.add(writer_id)
        try:
            yield writer_id
        finally:
            self._live.discard(writer_id)


#: The registry. Tests may make their own ``WriterRegistry`` (one per simulated process).
WRITERS = WriterRegistry()
