"""Runs: the ledger of runs across connections, the run table per connection, one writer task per shown run,
and the reconcile pass."""

from owc.runs.ledger import Ledger
from owc.runs.run import Run, WriterHandle
from owc.runs.table import RunKeeper, RunTable
from owc.runs.writer import Stats, WriterContext, write_run

__all__ = ["Ledger", "Run", "RunKeeper", "RunTable", "Stats", "WriterContext", "WriterHandle", "write_run"]
