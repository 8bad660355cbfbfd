"""What the run table's helpers need of a connection's table and of the process-wide keeper, as protocols.

The cut driver (``cuts.py``), the reconcile pass (``reconcile.py``) and the Pipe's inline writer (``inline.py``)
act through a connection's ``RunTable`` and the ``RunKeeper`` that holds it, and ``table.py`` builds and calls them.
Were they to name those classes, the package would import in a circle (issue 26: ``cuts``, ``reconcile`` and
``table`` did). So each names only what it uses, here; ``table.py`` satisfies these protocols structurally, and
``tests/test_import_graph.py`` keeps ``owc/`` free of circles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from owc.emit import Emitter
from owc.gateway import Connection, HelloInfo
from owc.protocol import ChatHistory
from owc.registry import WriterRegistry
from owc.rules.lifecycle import Input
from owc.runs.correct import Corrections
from owc.runs.ledger import Ledger
from owc.runs.run import Run
from owc.store import TrioChatStore


class Keeper(Protocol):
    """The process-wide side of the runs (``RunKeeper``): what outlives a connection."""

    @property
    def store(self) -> TrioChatStore: ...

    @property
    def emitter(self) -> Emitter: ...

    @property
    def ledger(self) -> Ledger: ...

    def wake(self, chat_id: str | None = None) -> None:
        """Runs of ``chat_id`` changed (None: of every chat)."""

    async def until(self, predicate: Callable[[], bool], chat_id: str | None = None) -> None:
        """Wait, without a clock, until ``predicate`` holds (re-checked as ``chat_id``'s runs change)."""


class Table(Protocol):
    """A connection's run table (``RunTable``): its RPC, its tasks, its hello."""

    @property
    def conn(self) -> Connection: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def hello(self) -> HelloInfo | None: ...

    @property
    def writer_id(self) -> str: ...

    async def request(self, method: str, params: Any = None) -> Any:
        """The connection's RPC."""

    async def next_tick(self) -> None:
        """Wait for the Gateway's next tick."""

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Start a task of the connection (it ends with the connection)."""

    def apply(self, run: Run, event: Input) -> None:
        """Feed one input to a run's lifecycle and do what it answers."""


class CutsSeen(Protocol):
    """What a reconcile pass tells the cut driver about a chat it read."""

    def seen_chat(
        self, table: Any, chat_id: str, messages: dict[str, Any], history: ChatHistory | None = None
    ) -> None: ...

    def seen_history(self, row: Any, history: ChatHistory) -> None: ...


class PassKeeper(Keeper, Protocol):
    """What a reconcile pass needs of the keeper besides ``Keeper``."""

    @property
    def cuts(self) -> CutsSeen: ...

    @property
    def corrections(self) -> Corrections: ...

    @property
    def chat_times(self) -> Mapping[str, int] | None: ...


class PassTable(Table, Protocol):
    """What a reconcile pass needs of its connection's table besides ``Table``."""

    @property
    def keeper(self) -> PassKeeper: ...

    def owes_next(self, chat_id: str, place: tuple[int, int, int] | None) -> None: ...

    def reconciled_chat(self, chat_id: str, *, settled: bool = True) -> None: ...


class InlineKeeper(Keeper, Protocol):
    """What the Pipe's inline writer needs of the keeper besides ``Keeper``."""

    @property
    def registry(self) -> WriterRegistry: ...

    @property
    def table(self) -> Table | None: ...
