"""Runs: the ledger of runs across connections, the run table per connection, one writer task per shown run,
and the reconcile pass."""

from owc.runs.ledger import Ledger
from owc.runs.run import Run, WriterHandle
from owc.runs.table import Bridge, RunTable
from owc.runs.writer import Stats, WriterContext, write_run

__all__ = ["Bridge", "Ledger", "Run", "RunTable", "Stats", "WriterContext", "WriterHandle", "write_run"]
