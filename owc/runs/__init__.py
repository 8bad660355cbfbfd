"""Runs: the per-connection run table and the one writer task per shown run."""

from owc.runs.table import Bridge, RunEntry, RunTable
from owc.runs.writer import RunWriter

__all__ = ["Bridge", "RunEntry", "RunTable", "RunWriter"]
