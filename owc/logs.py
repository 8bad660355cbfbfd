"""owc's logging: the process id and worker in every line, text or JSON lines, and the ring of the last errors the
operator's view shows (issue 31).

Two places set logging up, differently, because one owns the process and the other is a guest:

* the ``owc`` command (``configure``): owc owns stderr; one handler on the root logger with owc's format, text
  (``time LEVEL logger pid=N worker=W message``) or JSON (one object per line: ``time``, ``level``, ``logger``,
  ``message``, ``pid``, ``worker``, and the message's ``key=value`` fields);
* inside Open WebUI (``stamp_open_webui``): Open WebUI owns the handlers (its ``InterceptHandler`` passes only a
  record's formatted message on to loguru, dropping any attribute a filter adds), so owc stamps ``pid=N worker=W``
  into the message of each record of the ``owc`` loggers. A filter on the ``owc`` logger itself would see only
  records logged to ``owc`` exactly (Python consults a logger's filters for its own records, not its children's), so
  the stamp is a handler on ``owc`` that writes nothing: handlers see every record that propagates through them,
  and the same record then reaches Open WebUI's handler, stamped.

Never a token, a key or a user's words: those are never put in a log message to begin with (the house rule); this
module adds only the process id and the worker name.
"""

from __future__ import annotations

import collections
import logging
import multiprocessing
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import attrs
import orjson

#: The levels ``--log-level`` accepts.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s pid=%(pid)d worker=%(worker)s %(message)s"

#: ``key=value`` in owc's messages (``runs.claimed run=r1 chat=c1``): the JSON line's structured fields.
_FIELD = re.compile(r"(?:^|\s)([a-z_][a-z0-9_]*)=(\S+)")
#: A message's leading event name (``runs.claimed``).
_EVENT = re.compile(r"^([a-z_]+(?:\.[a-z_0-9]+)+)(?:\s|:|$)")


def worker_name() -> str:
    """This process's worker name: uvicorn's worker processes are multiprocessing's spawned children, named
    ``SpawnProcess-N``; a single process is ``main``."""
    name = multiprocessing.current_process().name
    return "main" if name == "MainProcess" else name


class ProcessFields(logging.Filter):
    """Adds ``pid`` and ``worker`` to each record (the pid read per record: a forked worker has its own)."""

    def __init__(self, worker: str) -> None:
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        record.pid = os.getpid()
        record.worker = self.worker
        return True


def fields_of(message: str) -> dict[str, str]:
    """The structured fields of one of owc's messages: ``event`` (its leading dotted name) and each ``key=value``."""
    found: dict[str, str] = {}
    event = _EVENT.match(message)
    if event is not None:
        found["event"] = event.group(1)
    for key, value in _FIELD.findall(message):
        found.setdefault(key, value)
    return found


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line: ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger``,
    ``message``, ``pid``, ``worker``, the message's fields (under ``fields``) and, for an exception, ``exception``
    (its traceback as one string)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        body: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": message,
            "pid": getattr(record, "pid", os.getpid()),
            "worker": getattr(record, "worker", worker_name()),
        }
        fields = fields_of(message)
        if fields:
            body["fields"] = fields
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(body, default=str).decode()


def level_of(text: str) -> int:
    """A ``--log-level`` value (any case) as a logging level; ``ValueError`` naming the choices."""
    name = text.strip().upper()
    if name not in LEVELS:
        raise ValueError(f"--log-level {text!r}: one of {', '.join(LEVELS)} (any case)")
    return getattr(logging, name)


def configure(
    level: int,
    fmt: str = "text",
    *,
    worker: str = "main",
    owc_level: int | None = None,
    stream: IO[str] | None = None,
    force: bool = False,
) -> logging.Handler | None:
    """The ``owc`` command's logging: one handler on the root logger writing to ``stream`` (stderr). ``level``: the
    root's (other libraries' lines); ``owc_level``: the ``owc`` loggers' own when it differs (``owc run`` logs its
    steps at INFO while libraries stay at WARNING; None: the root's). Returns the handler.

    Like ``logging.basicConfig``, it leaves a host's logging alone: when the root logger already has handlers that
    are not owc's (``main`` called inside a test runner that captures logs), only ``owc_level`` is applied and None
    is returned; ``force`` installs owc's handler anyway (a handler owc installed before is replaced either way)."""
    root = logging.getLogger()
    foreign = [handler for handler in root.handlers if not getattr(handler, "owc_handler", False)]
    if owc_level is not None:
        logging.getLogger("owc").setLevel(owc_level)
    if foreign and not force:
        return None
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.owc_handler = True  # type: ignore[attr-defined]
    handler.addFilter(ProcessFields(worker))
    handler.setFormatter(JsonLines() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    for old in list(root.handlers):
        if getattr(old, "owc_handler", False):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


class _Stamp(logging.Handler):
    """Writes nothing: stamps ``pid=N worker=W`` into each owc record's message on its way to Open WebUI's
    handlers (see the module's doc)."""

    def __init__(self, worker: str) -> None:
        super().__init__(logging.NOTSET)
        self.fields = ProcessFields(worker)

    def handle(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "owc_stamped", False):
            self.fields.filter(record)
            record.msg = f"{record.getMessage()} pid={record.pid} worker={record.worker}"
            record.args = None
            record.owc_stamped = True
        return True

    def emit(self, record: logging.LogRecord) -> None:
        pass


def stamp_open_webui(worker: str | None = None) -> bool:
    """Inside Open WebUI: every line of owc's loggers says its process id and worker, so with several workers the
    operator can tell which one served a request. Installed once per process (``owc.owui.process``); False when it
    already was."""
    owc = logging.getLogger("owc")
    if any(isinstance(handler, _Stamp) for handler in owc.handlers):
        return False
    owc.addHandler(_Stamp(worker or worker_name()))
    return True


# ---------------------------------------------------------------------------------------------- the last errors


@attrs.frozen
class LogLine:
    """One warning or error as the operator's view shows it."""

    at: float
    level: str
    logger: str
    message: str

    def line(self) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at))
        return f"{stamp} {self.level} {self.logger} {self.message}"


class ErrorRing(logging.Handler):
    """The last ``capacity`` warning and error lines of the ``owc`` loggers, and how many there were in all: the
    runtime keeps one for its lifetime (``owc.runtime.open_runtime``) for its snapshot. The first line of each
    message only (a traceback stays in the log)."""

    def __init__(self, capacity: int = 20, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.ring: collections.deque[LogLine] = collections.deque(maxlen=capacity)
        self.total = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().splitlines()[0][:500] if record.getMessage() else ""
        except Exception:  # a record whose arguments do not format: still counted
            message = str(record.msg)[:500]
        self.ring.append(LogLine(record.created, record.levelname, record.name, message))
        self.total += 1

    def lines(self) -> tuple[LogLine, ...]:
        return tuple(self.ring)


@contextmanager
def collecting_errors(capacity: int = 20, logger: str = "owc") -> Iterator[ErrorRing]:
    """An ``ErrorRing`` on ``logger`` for the block."""
    ring = ErrorRing(capacity)
    target = logging.getLogger(logger)
    target.addHandler(ring)
    try:
        yield ring
    finally:
        target.removeHandler(ring)
