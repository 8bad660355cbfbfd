"""The process-wide writer registry: the one piece of global mutable state owc has (seed 000 section 2.3).

Every live connection session registers its writer id; a message whose recorded ``meta.openclaw_writer`` is
not registered here belongs to a connection of this process that has closed, or to another process, and a
claim may take it over. (Two live processes sharing one database may therefore both write one message; the
row-locked claim still guarantees it is one message, and both finalize it from the same transcript.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class WriterRegistry:
    def __init__(self) -> None:
        self._live: set[str] = set()

    def is_alive(self, writer_id: str | None) -> bool:
        return writer_id is not None and writer_id in self._live

    @contextmanager
    def registered(self, writer_id: str) -> Iterator[str]:
        self._live.add(writer_id)
        try:
            yield writer_id
        finally:
            self._live.discard(writer_id)

    def __len__(self) -> int:
        return len(self._live)


#: The registry. Tests may make their own ``WriterRegistry`` and pass its ``is_alive``.
WRITERS = WriterRegistry()
