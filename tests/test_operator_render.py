"""The operator's view, pure (``owc/render/operator.py``, issue 31): the exact Prometheus text of a snapshot (HELP
and TYPE lines, label escaping), the human lines (one line each, whatever the Gateway sends), the JSON and its
inverse; ``owc/logs.py``'s JSON lines and fields. The runtime that assembles a snapshot is tests/test_operator.py's."""

from __future__ import annotations

import io
import json
import logging
import sys
from typing import Any

import attrs
import pytest

from owc import logs
from owc.render.operator import (
    ChatFigure,
    RunFigure,
    Snapshot,
    as_json,
    chats_of,
    escape_help,
    escape_label,
    from_json,
    lines,
    prometheus,
)

SNAP = Snapshot(
    owc_version="0.1.0",
    pid=42,
    worker="run",
    gateway="ws://gw:18789/",
    state="connected",
    why=None,
    server_version="2026.9.6",
    boot_id='boot-"1"\\x\nend',  # a quote, a backslash and a line feed: every escape the format has
    protocol=4,
    connections_opened=2,
    attempts=3,
    device_id="dev1",
    pairing="paired",
    pairing_line="paired (its device token is stored)",
    process_id="p1",
    writers=("p1/c2",),
    chats=(
        ChatFigure("chat-a", (RunFigure("r1", "STREAMING", False, True), RunFigure("r2", "FINALIZING", True, True))),
        ChatFigure("chat-b", (RunFigure("r3", "OPEN", False, False),)),
    ),
    errors=("2026-01-01T00:00:00Z WARNING owc.gateway gateway.connect_failed url=ws://gw:18789/ error=x",),
    errors_total=5,
    lane_busy=True,
    lane_waiting=2,
    threads_busy=1,
    threads_total=4,
)

METRICS = """\
# HELP owc_info owc's version, process id and worker (always 1).
# TYPE owc_info gauge
owc_info{version="0.1.0",pid="42",worker="run"} 1
# HELP owc_connected 1 when connected to the Gateway, else 0.
# TYPE owc_connected gauge
owc_connected 1
# HELP owc_connection_state The connection's state (1 for the current one): connected, connecting, waiting, held.
# TYPE owc_connection_state gauge
owc_connection_state{state="connected"} 1
owc_connection_state{state="connecting"} 0
owc_connection_state{state="waiting"} 0
owc_connection_state{state="held"} 0
# HELP owc_gateway_info The Gateway of the current connection (the last one's when not connected).
# TYPE owc_gateway_info gauge
owc_gateway_info{url="ws://gw:18789/",version="2026.9.6",boot_id="boot-\\"1\\"\\\\x\\nend"} 1
# HELP owc_gateway_connections_opened_total Connections that reached hello-ok since owc started.
# TYPE owc_gateway_connections_opened_total counter
owc_gateway_connections_opened_total 2
# HELP owc_gateway_connect_attempts_total Connection attempts since owc started.
# TYPE owc_gateway_connect_attempts_total counter
owc_gateway_connect_attempts_total 3
# HELP owc_device_info owc's device and its pairing: off, paired, pending, local, unpaired, unknown (always 1).
# TYPE owc_device_info gauge
owc_device_info{device_id="dev1",pairing="paired"} 1
# HELP owc_runs_in_flight Runs whose end has not arrived, all chats.
# TYPE owc_runs_in_flight gauge
owc_runs_in_flight 2
# HELP owc_chat_runs_in_flight Runs whose end has not arrived, per chat with unsettled runs.
# TYPE owc_chat_runs_in_flight gauge
owc_chat_runs_in_flight{chat="chat-a"} 1
owc_chat_runs_in_flight{chat="chat-b"} 1
# HELP owc_runs_unsettled The ledger's unsettled runs (message not finished yet).
# TYPE owc_runs_unsettled gauge
owc_runs_unsettled 3
# HELP owc_runs_writing Runs a writer task of this process works on.
# TYPE owc_runs_writing gauge
owc_runs_writing 2
# HELP owc_writers_live Writer ids registered live in this process (one per open connection).
# TYPE owc_writers_live gauge
owc_writers_live 1
# HELP owc_errors_total Warning and error log lines since owc started.
# TYPE owc_errors_total counter
owc_errors_total 5
# HELP owc_db_write_lane_busy 1 while a write holds the database's write lane.
# TYPE owc_db_write_lane_busy gauge
owc_db_write_lane_busy 1
# HELP owc_db_write_lane_waiting Writes queued for the database's write lane.
# TYPE owc_db_write_lane_waiting gauge
owc_db_write_lane_waiting 2
# HELP owc_db_threads_busy Database worker threads in use (of owc_db_threads_total).
# TYPE owc_db_threads_busy gauge
owc_db_threads_busy 1
# HELP owc_db_threads_total Database worker threads owc may use.
# TYPE owc_db_threads_total gauge
owc_db_threads_total 4
"""


def test_the_metrics_text_is_exactly_the_exposition_format() -> None:
    assert prometheus(SNAP) == METRICS


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("plain", "plain"),
        ('a "quoted" word', 'a \\"quoted\\" word'),
        ("back\\slash", "back\\\\slash"),
        ("two\nlines", "two\\nlines"),
        ('\\"\n', '\\\\\\"\\n'),  # each escape on its own, in order: no double escaping
        ("ünïcode", "ünïcode"),  # UTF-8 as it is
    ],
)
def test_a_label_value_escapes_backslash_quote_and_line_feed(value: str, escaped: str) -> None:
    assert escape_label(value) == escaped


def test_a_help_text_escapes_backslash_and_line_feed_but_not_a_quote() -> None:
    assert escape_help('say "hi"\\\nnow') == 'say "hi"\\\\\\nnow'


def test_a_chat_without_runs_has_no_sample_and_a_family_keeps_its_help_and_type() -> None:
    text = prometheus(attrs.evolve(SNAP, chats=()))
    assert (
        "# HELP owc_chat_runs_in_flight Runs whose end has not arrived, per chat with unsettled runs.\n"
        "# TYPE owc_chat_runs_in_flight gauge\n"
        "# HELP owc_runs_unsettled " in text
    )
    assert "owc_runs_in_flight 0\n" in text and "owc_runs_unsettled 0\n" in text


def test_every_sample_line_belongs_to_a_family_declared_before_it() -> None:
    declared: set[str] = set()
    for line in prometheus(SNAP).splitlines():
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
        elif not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            assert name in declared and name.startswith("owc_"), line


def test_the_lines_say_every_figure_one_line_each() -> None:
    assert lines(SNAP) == [
        "owc 0.1.0 pid 42 worker run",
        'gateway ws://gw:18789/: connected (Gateway 2026.9.6, boot boot-"1"\\\\x\\nend, protocol 4)',
        "connections opened 2, attempts 3",
        "device dev1: paired (its device token is stored)",
        "runs in flight 2, unsettled 3, writing 2",
        "  chat chat-a: r1 STREAMING writing, r2 FINALIZING ended writing",
        "  chat chat-b: r3 OPEN",
        "writers 1 live (process p1)",
        "  writer p1/c2",
        "database write lane busy, 2 waiting; threads 1/4",
        "last errors (1 of 5):",
        "  2026-01-01T00:00:00Z WARNING owc.gateway gateway.connect_failed url=ws://gw:18789/ error=x",
    ]


def test_not_connected_the_gateway_line_says_why() -> None:
    down = attrs.evolve(
        SNAP, state="waiting", why="the connection closed (code 1006): ", chats=(), writers=(), errors=()
    )
    shown = lines(down)
    assert shown[1] == "gateway ws://gw:18789/: not connected (waiting): the connection closed (code 1006): "
    assert shown[-1] == "last errors: none"
    assert prometheus(down).count("owc_connected 0\n") == 1
    assert 'owc_connection_state{state="waiting"} 1\n' in prometheus(down)


def test_the_json_says_the_same_and_reads_back() -> None:
    body = json.loads(json.dumps(as_json(SNAP)))
    assert body["connected"] is True and body["pid"] == 42 and body["worker"] == "run"
    assert body["runs"]["chats"][0] == {
        "chat_id": "chat-a",
        "in_flight": 1,
        "runs": [
            {"run_id": "r1", "state": "STREAMING", "ended": False, "writing": True},
            {"run_id": "r2", "state": "FINALIZING", "ended": True, "writing": True},
        ],
    }
    assert body["database"] == {"lane_busy": True, "lane_waiting": 2, "threads_busy": 1, "threads_total": 4}
    assert from_json(body) == SNAP


def test_runs_are_grouped_by_chat_in_the_order_of_their_first_run() -> None:
    a, b, c = RunFigure("a", "OPEN", False, False), RunFigure("b", "OPEN", False, False), RunFigure("c", "DONE", 1, 0)
    assert chats_of([("x", a), ("y", b), ("x", c)]) == (ChatFigure("x", (a, c)), ChatFigure("y", (b,)))


def test_the_renderers_are_pure() -> None:
    """The same check as the core's (tests/test_core_purity.py): importing it loads no Trio and no shell."""
    import subprocess

    from test_core_purity import FORBIDDEN

    code = f"import sys\nimport owc.render.operator\nprint(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == ""


# ---------------------------------------------------------------------------------------------- owc/logs.py


@pytest.fixture(autouse=True)
def _logging_restored() -> Any:
    """Each test leaves the logging tree as it found it (pytest's capture handlers, the levels)."""
    root, owc = logging.getLogger(), logging.getLogger("owc")
    handlers, level, owc_level, owc_handlers = list(root.handlers), root.level, owc.level, list(owc.handlers)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    owc.setLevel(owc_level)
    owc.handlers[:] = owc_handlers


def test_a_json_line_has_time_level_logger_message_pid_worker_and_the_fields() -> None:
    out = io.StringIO()
    logs.configure(logging.WARNING, "json", worker="w1", owc_level=logging.INFO, stream=out, force=True)
    logging.getLogger("owc.runs").info("runs.claimed run=%s chat=%s message=%s", "r1", "c1", "m1")
    logging.getLogger("owc.runs").debug("runs.input run=r1")  # under owc's level: not written
    logging.getLogger("trio").info("not owc's")  # other libraries stay at WARNING
    written = out.getvalue().splitlines()
    assert len(written) == 1
    line = json.loads(written[0])
    assert set(line) == {"time", "level", "logger", "message", "pid", "worker", "fields"}
    assert line["level"] == "INFO" and line["logger"] == "owc.runs" and line["worker"] == "w1"
    assert line["message"] == "runs.claimed run=r1 chat=c1 message=m1"
    assert line["fields"] == {"event": "runs.claimed", "run": "r1", "chat": "c1", "message": "m1"}
    assert isinstance(line["pid"], int) and line["time"].endswith("Z")


def test_a_text_line_says_the_pid_and_worker() -> None:
    out = io.StringIO()
    logs.configure(logging.INFO, "text", worker="run", stream=out, force=True)
    logging.getLogger("owc.gateway").warning("gateway.connect_failed url=%s", "ws://x/")
    import os

    assert f" WARNING owc.gateway pid={os.getpid()} worker=run gateway.connect_failed url=ws://x/" in out.getvalue()


def test_inside_open_webui_every_owc_line_is_stamped_once_with_pid_and_worker() -> None:
    """Open WebUI's handler passes only the message on (its InterceptHandler): the stamp is in the message, for the
    records of every owc logger, not only ``owc``'s own."""
    import os

    seen: list[str] = []

    class Root(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    root = Root()
    logging.getLogger().addHandler(root)
    logging.getLogger("owc").setLevel(logging.INFO)
    assert logs.stamp_open_webui("SpawnProcess-2") is True
    assert logs.stamp_open_webui("SpawnProcess-2") is False  # once per process
    logging.getLogger("owc.runs").warning("runs.x chat=%s", "c1")
    logging.getLogger("other").warning("not owc's")
    assert seen == [f"runs.x chat=c1 pid={os.getpid()} worker=SpawnProcess-2", "not owc's"]


def test_the_error_ring_keeps_the_last_lines_and_counts_all() -> None:
    with logs.collecting_errors(capacity=2) as ring:
        log = logging.getLogger("owc.test")
        log.info("not kept")
        for n in range(3):
            log.warning("w%d\nsecond line", n)
    logging.getLogger("owc.test").error("after the block: not kept")
    assert ring.total == 3
    assert [line.message for line in ring.lines()] == ["w1", "w2"]
    assert ring.lines()[0].line().endswith(" WARNING owc.test w1")


def test_a_bad_level_is_refused_naming_the_choices() -> None:
    assert logs.level_of("debug") == logging.DEBUG
    with pytest.raises(ValueError, match=r"--log-level 'loud': one of DEBUG, INFO, WARNING, ERROR, CRITICAL"):
        logs.level_of("loud")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
