"""The operator's view of one owc runtime (issue 31): a frozen snapshot of its figures and three pure renderings of
it, human lines, JSON and the Prometheus text exposition format. Pure: no I/O, no Trio.

Why a value and renderers apart: the same figures are served by ``owc run``'s loopback endpoint (``owc status``,
``/status``, ``/metrics``: ``owc.ops.http``) and by owc's admin routes inside Open WebUI (``owc.owui.health``), and
every place must say the same thing. ``Runtime.snapshot`` assembles the value from the runtime's parts; nothing
here reads a live object, so each renderer is checked cell by cell against a value a test builds.

What a snapshot never holds: a token, a key, a device token, a user's words. It names the Gateway's URL (redacted),
chat ids, run ids, writer ids and the device id, which an admin may see.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs


@attrs.frozen
class RunFigure:
    """One unsettled run: its id, its lifecycle state's name (``owc.rules.lifecycle.State``), whether its end has
    arrived, and whether a writer task of this process works on it now."""

    run_id: str
    state: str
    ended: bool
    writing: bool


@attrs.frozen
class ChatFigure:
    """A chat's unsettled runs, oldest first."""

    chat_id: str
    runs: tuple[RunFigure, ...]

    @property
    def in_flight(self) -> int:
        """Runs whose end has not arrived yet."""
        return sum(1 for run in self.runs if not run.ended)


@attrs.frozen
class Snapshot:
    """The runtime now. ``state``: ``connected``, ``connecting`` (an attempt under way), ``waiting`` (the backoff
    before the next attempt) or ``held`` (a refusal retrying cannot fix: no attempt until new settings). ``why``:
    when not connected, the one line that says why (a refusal's line, the last close, the last connect failure).
    ``pairing``: ``off`` (no device: the shared token alone), ``paired`` (a device token stored), ``pending``
    (waiting for a person to approve it on the Gateway host), ``local`` (let in without pairing), ``unpaired``,
    ``unknown`` (the device file could not be read); ``pairing_line`` says it in words."""

    owc_version: str
    pid: int
    worker: str
    gateway: str
    state: str
    why: str | None
    server_version: str | None
    boot_id: str | None
    protocol: int | None
    connections_opened: int
    attempts: int
    device_id: str | None
    pairing: str
    pairing_line: str
    process_id: str
    writers: tuple[str, ...]
    chats: tuple[ChatFigure, ...]
    errors: tuple[str, ...]
    errors_total: int
    lane_busy: bool
    lane_waiting: int
    threads_busy: int
    threads_total: int

    @property
    def connected(self) -> bool:
        return self.state == "connected"

    @property
    def unsettled(self) -> int:
        return sum(len(chat.runs) for chat in self.chats)

    @property
    def in_flight(self) -> int:
        return sum(chat.in_flight for chat in self.chats)

    @property
    def writing(self) -> int:
        return sum(1 for chat in self.chats for run in chat.runs if run.writing)


def chats_of(runs: Iterable[tuple[str, RunFigure]]) -> tuple[ChatFigure, ...]:
    """``(chat id, run)`` pairs, in the ledger's order, grouped by chat (chats in the order of their first run)."""
    grouped: dict[str, list[RunFigure]] = {}
    for chat_id, run in runs:
        grouped.setdefault(chat_id, []).append(run)
    return tuple(ChatFigure(chat_id, tuple(chat_runs)) for chat_id, chat_runs in grouped.items())


# ---------------------------------------------------------------------------------------------- human lines


def _one_line(text: object) -> str:
    """A text from elsewhere (the Gateway's boot id and version, a close reason) kept on its line."""
    return str(text).replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def lines(snap: Snapshot) -> list[str]:
    """What ``owc status`` prints: one line per figure, the runs and errors indented under their heading. Texts
    from elsewhere keep to their line (a line feed in one is shown as ``\\n``)."""
    snap = attrs.evolve(
        snap,
        gateway=_one_line(snap.gateway),
        why=_one_line(snap.why) if snap.why is not None else None,
        server_version=_one_line(snap.server_version) if snap.server_version is not None else None,
        boot_id=_one_line(snap.boot_id) if snap.boot_id is not None else None,
        pairing_line=_one_line(snap.pairing_line),
        errors=tuple(_one_line(line) for line in snap.errors),
    )
    out = [f"owc {snap.owc_version} pid {snap.pid} worker {snap.worker}"]
    if snap.connected:
        out.append(
            f"gateway {snap.gateway}: connected (Gateway {snap.server_version or 'version unknown'},"
            f" boot {snap.boot_id or 'unknown'}, protocol {snap.protocol if snap.protocol is not None else '?'})"
        )
    else:
        out.append(f"gateway {snap.gateway}: not connected ({snap.state}): {snap.why or 'no reason known yet'}")
    out.append(f"connections opened {snap.connections_opened}, attempts {snap.attempts}")
    out.append(f"device {snap.device_id or '(none)'}: {snap.pairing_line}")
    out.append(f"runs in flight {snap.in_flight}, unsettled {snap.unsettled}, writing {snap.writing}")
    for chat in snap.chats:
        runs = ", ".join(
            f"{run.run_id} {run.state}{' ended' if run.ended else ''}{' writing' if run.writing else ''}"
            for run in chat.runs
        )
        out.append(f"  chat {chat.chat_id}: {runs}")
    out.append(f"writers {len(snap.writers)} live (process {snap.process_id})")
    out.extend(f"  writer {writer}" for writer in snap.writers)
    lane = "busy" if snap.lane_busy else "idle"
    out.append(
        f"database write lane {lane}, {snap.lane_waiting} waiting; threads {snap.threads_busy}/{snap.threads_total}"
    )
    if snap.errors:
        out.append(f"last errors ({len(snap.errors)} of {snap.errors_total}):")
        out.extend(f"  {line}" for line in snap.errors)
    else:
        out.append("last errors: none")
    return out


# ---------------------------------------------------------------------------------------------- JSON


def as_json(snap: Snapshot) -> dict[str, Any]:
    """``/status``'s body (and the admin route's inside Open WebUI): plain JSON types, stable keys."""
    return {
        "owc_version": snap.owc_version,
        "pid": snap.pid,
        "worker": snap.worker,
        "gateway": snap.gateway,
        "connected": snap.connected,
        "state": snap.state,
        "why": snap.why,
        "server_version": snap.server_version,
        "boot_id": snap.boot_id,
        "protocol": snap.protocol,
        "connections_opened": snap.connections_opened,
        "attempts": snap.attempts,
        "device": {"id": snap.device_id, "pairing": snap.pairing, "line": snap.pairing_line},
        "runs": {
            "in_flight": snap.in_flight,
            "unsettled": snap.unsettled,
            "writing": snap.writing,
            "chats": [
                {"chat_id": chat.chat_id, "in_flight": chat.in_flight, "runs": [attrs.asdict(r) for r in chat.runs]}
                for chat in snap.chats
            ],
        },
        "writers": {"process": snap.process_id, "live": list(snap.writers)},
        "errors": {"total": snap.errors_total, "last": list(snap.errors)},
        "database": {
            "lane_busy": snap.lane_busy,
            "lane_waiting": snap.lane_waiting,
            "threads_busy": snap.threads_busy,
            "threads_total": snap.threads_total,
        },
    }


# ---------------------------------------------------------------------------------------------- Prometheus text

#: The text exposition format's content type (version 0.0.4).
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label(value: str) -> str:
    """A label value in the text format: backslash, double quote and line feed escaped (``\\\\``, ``\\"``,
    ``\\n``); everything else as it is (UTF-8)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A HELP line's text: backslash and line feed escaped (a double quote is left as it is there)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _sample(name: str, labels: Sequence[tuple[str, str]], value: float | int) -> str:
    shown = str(int(value)) if float(value).is_integer() else repr(float(value))
    if not labels:
        return f"{name} {shown}"
    inner = ",".join(f'{key}="{escape_label(val)}"' for key, val in labels)
    return f"{name}{{{inner}}} {shown}"


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[Sequence[tuple[str, str]], float | int]]
) -> list[str]:
    return [
        f"# HELP {name} {escape_help(help_text)}",
        f"# TYPE {name} {kind}",
        *(_sample(name, labels, value) for labels, value in samples),
    ]


def prometheus(snap: Snapshot) -> str:
    """``/metrics``: every figure as a metric prefixed ``owc_``, each with its HELP and TYPE lines; ends with a line
    feed. Per-chat figures are labelled by chat id (bounded by the runs in flight); the texts (versions, boot id,
    device id, pairing) are labels of ``_info`` gauges whose value is 1."""
    process = [("pid", str(snap.pid)), ("worker", snap.worker)]
    out: list[str] = []
    out += _family(
        "owc_info",
        "gauge",
        "owc's version, process id and worker (always 1).",
        [([("version", snap.owc_version), *process], 1)],
    )
    out += _family("owc_connected", "gauge", "1 when connected to the Gateway, else 0.", [((), int(snap.connected))])
    out += _family(
        "owc_connection_state",
        "gauge",
        "The connection's state (1 for the current one): connected, connecting, waiting, held.",
        [([("state", state)], int(snap.state == state)) for state in ("connected", "connecting", "waiting", "held")],
    )
    gateway = [("url", snap.gateway), ("version", snap.server_version or ""), ("boot_id", snap.boot_id or "")]
    out += _family(
        "owc_gateway_info",
        "gauge",
        "The Gateway of the current connection (the last one's when not connected).",
        [(gateway, 1)],
    )
    out += _family(
        "owc_gateway_connections_opened_total",
        "counter",
        "Connections that reached hello-ok since owc started.",
        [((), snap.connections_opened)],
    )
    out += _family(
        "owc_gateway_connect_attempts_total",
        "counter",
        "Connection attempts since owc started.",
        [((), snap.attempts)],
    )
    out += _family(
        "owc_device_info",
        "gauge",
        "owc's device and its pairing: off, paired, pending, local, unpaired, unknown (always 1).",
        [([("device_id", snap.device_id or ""), ("pairing", snap.pairing)], 1)],
    )
    out += _family("owc_runs_in_flight", "gauge", "Runs whose end has not arrived, all chats.", [((), snap.in_flight)])
    out += _family(
        "owc_chat_runs_in_flight",
        "gauge",
        "Runs whose end has not arrived, per chat with unsettled runs.",
        [([("chat", chat.chat_id)], chat.in_flight) for chat in snap.chats],
    )
    out += _family(
        "owc_runs_unsettled",
        "gauge",
        "The ledger's unsettled runs (message not finished yet).",
        [((), snap.unsettled)],
    )
    out += _family("owc_runs_writing", "gauge", "Runs a writer task of this process works on.", [((), snap.writing)])
    out += _family(
        "owc_writers_live",
        "gauge",
        "Writer ids registered live in this process (one per open connection).",
        [((), len(snap.writers))],
    )
    out += _family(
        "owc_errors_total", "counter", "Warning and error log lines since owc started.", [((), snap.errors_total)]
    )
    out += _family(
        "owc_db_write_lane_busy",
        "gauge",
        "1 while a write holds the database's write lane.",
        [((), int(snap.lane_busy))],
    )
    out += _family(
        "owc_db_write_lane_waiting", "gauge", "Writes queued for the database's write lane.", [((), snap.lane_waiting)]
    )
    out += _family(
        "owc_db_threads_busy",
        "gauge",
        "Database worker threads in use (of owc_db_threads_total).",
        [((), snap.threads_busy)],
    )
    out += _family("owc_db_threads_total", "gauge", "Database worker threads owc may use.", [((), snap.threads_total)])
    return "\n".join(out) + "\n"


def from_json(body: dict[str, Any]) -> Snapshot:
    """``as_json``'s inverse: what ``owc status`` reads from ``/status`` (its lines are then ``lines``'s). Raises
    ``KeyError`` / ``TypeError`` / ``ValueError`` for a body that is not one."""
    runs, device, database = body["runs"], body["device"], body["database"]
    return Snapshot(
        owc_version=str(body["owc_version"]),
        pid=int(body["pid"]),
        worker=str(body["worker"]),
        gateway=str(body["gateway"]),
        state=str(body["state"]),
        why=body["why"],
        server_version=body["server_version"],
        boot_id=body["boot_id"],
        protocol=body["protocol"],
        connections_opened=int(body["connections_opened"]),
        attempts=int(body["attempts"]),
        device_id=device["id"],
        pairing=str(device["pairing"]),
        pairing_line=str(device["line"]),
        process_id=str(body["writers"]["process"]),
        writers=tuple(str(w) for w in body["writers"]["live"]),
        chats=tuple(
            ChatFigure(str(chat["chat_id"]), tuple(RunFigure(**run) for run in chat["runs"])) for chat in runs["chats"]
        ),
        errors=tuple(str(line) for line in body["errors"]["last"]),
        errors_total=int(body["errors"]["total"]),
        lane_busy=bool(database["lane_busy"]),
        lane_waiting=int(database["lane_waiting"]),
        threads_busy=int(database["threads_busy"]),
        threads_total=int(database["threads_total"]),
    )
