"""A hostile Gateway for tests: the simulator (real handshake, real runs and transcripts) with two hooks.

* ``Wire``: what the simulator serialises is rewritten on its way out, marker by marker, so a frame can carry
  JSON the simulator cannot write itself (a lone ``\\udXXX`` escape, arguments nested past orjson's 254
  levels), wherever the marker sits: a run's text, a tool's arguments, a transcript, a session row.
* ``Hostile``: raw messages injected into owc's connection, between the simulator's own frames, numbered
  with the connection's ``seq`` as the Gateway would number them (or with any ``seq`` a plan wants).

And the oracle of a plan: the good runs are finished messages with their whole text, and owc never closed
its connection (``owc_deaths``).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from owc.sim import delivery
from owc.sim.delivery import SimConn

#: A lone high surrogate as ``JSON.stringify`` writes it.
LONE = "\\ud83d"


class Wire:
    """Rewrites the simulator's outgoing JSON text: ``"<<NAME>>"`` (a whole JSON string) becomes raw JSON,
    and ``<<NAME>>`` inside a string becomes raw escape text."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.values: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        real = delivery.dumps

        def dumps(obj: Any) -> str:
            text = real(obj)
            if "<<" not in text:
                return text
            for name, raw in self.values.items():
                text = text.replace(f'"<<{name}>>"', raw)
            for name, raw in self.strings.items():
                text = text.replace(f"<<{name}>>", raw)
            return text

        monkeypatch.setattr(delivery, "dumps", dumps)

    def value(self, name: str, raw_json: str) -> str:
        """A marker value that goes out as ``raw_json``."""
        self.values[name] = raw_json
        return f"<<{name}>>"

    def string(self, name: str, raw_escape: str) -> str:
        """A marker to put inside a string; it goes out as ``raw_escape`` (e.g. ``LONE``)."""
        self.strings[name] = raw_escape
        return f"<<{name}>>"


def nested(depth: int, leaf: str = "1") -> str:
    """JSON text of objects nested ``depth`` deep."""
    return '{"a":' * depth + leaf + "}" * depth


class Hostile:
    """Inject raw messages into the simulator's connection to owc (instance ``name``)."""

    def __init__(self, sim: Any, name: str = "A") -> None:
        self.sim = sim
        self.name = name
        self.sent = 0

    @property
    def conn(self) -> SimConn:
        return self.sim.connection(self.name)

    def raw(self, message: str | bytes) -> None:
        """One WebSocket message as is: ``bytes`` go as a binary message."""
        conn = self.conn
        assert conn.send is not None
        conn.send.send_nowait(message)
        self.sent += 1

    def next_seq(self) -> int:
        """Spend the connection's next envelope number, as the Gateway does for every event it sends."""
        conn = self.conn
        conn.seq += 1
        return conn.seq

    def event(self, event: Any, payload: Any, *, seq: Any = "next", **envelope: Any) -> None:
        frame: dict[str, Any] = {"type": "event", "event": event, "payload": payload}
        if seq == "next":
            frame["seq"] = self.next_seq()
        elif seq is not None:
            frame["seq"] = seq
        frame.update(envelope)
        self.raw(orjson.dumps(frame).decode())


def owc_deaths(records: list[logging.LogRecord]) -> list[str]:
    """Log lines that say owc closed its connection, failed a writer, or crashed in a handler."""
    bad = (
        "gateway.closed",
        "gateway.connection_failed",
        "gateway.handler_failed",
        "gateway.subscribe_failed",
        "gateway.resync_failed",
        "gateway.dead_socket",
        "runs.writer_failed",
        "render.transcript_failed",
    )
    return [r.getMessage()[:300] for r in records if r.getMessage().startswith(bad)]
