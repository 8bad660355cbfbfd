"""One Gateway connection's state, sans I/O (issue 16): what ``owc.gateway.connection`` used to decide inline.

In the manner of h11 and hypercorn's protocol layer, the rules live here and are tested without a loop or a socket
(``tests/test_machine.py``); the Trio shell (``owc.gateway.connection``) feeds it every message the WebSocket
delivers and acts on what it answers: it wakes a request's waiter, calls the handler, starts a resync task.

* **Handshake steps** (``Handshake``): the first frame must be ``connect.challenge``; the ``connect`` request gets an
  id of its own; events before its reply are tolerated; the reply is the frame with that id.
* **Requests and their frame positions**: each request in flight by id; its reply carries the number of frames the
  connection had received when it came, so a ``sessions.list`` covers every gap whose frames came before it (the
  Gateway built the list after it sent or dropped them). A reply too large to parse fails its request at once.
* **seq, gaps and resyncs**: a gap is reported before the event that showed it is delivered; one resync runs at a
  time, and lists once more only for a gap after its list's position. A malformed event is not fed to the seq
  tracker (the next good one then reports the gap, and a bogus seq cannot blind gap detection).
* **The active-run tracker** (``owc.protocol.active``): start signals, terminals, and what a list changes.

Bad input is logged here (``gateway.bad_frame``, ``gateway.bad_event``, ``gateway.unexpected_response``, the seq gap)
with the connection's label (its redacted URL) and skipped: it never ends the connection.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any

import attrs

from owc.protocol.active import ActiveRuns, Resync
from owc.protocol.errors import FrameTooLarge, ProtocolError
from owc.protocol.events import AgentEvent, ChatEvent, Event, EventDecoder, Shutdown, Tick
from owc.protocol.frames import (
    EventFrame,
    Request,
    Response,
    decode_frame,
    encode_frame,
    response_id,
)
from owc.protocol.handshake import ConnectChallenge
from owc.protocol.results import SessionRow
from owc.protocol.seq import SeqTracker

log = logging.getLogger("owc.gateway")


class RequestTooLarge(ProtocolError):
    """A request owc was about to send is over the Gateway's ``policy.maxPayload``: refused before sending."""

    def __init__(self, method: str, size: int, limit: int) -> None:
        super().__init__(f"{method} request is {size} bytes (policy.maxPayload {limit})")
        self.method = method
        self.size = size
        self.limit = limit


@attrs.define
class Pending:
    """A request in flight: answered (``response``) or refused unparsed (``too_large``) at ``position``."""

    method: str
    response: Response | None = None
    too_large: FrameTooLarge | None = None
    position: int = 0  # how many frames the connection had received when the answer arrived


@attrs.frozen
class Answered:
    """A pending request's answer arrived (or was refused as too large): wake its waiter."""

    request_id: str


@attrs.frozen
class Lost:
    """Events were lost (a seq gap): tell the handler now, before ``event`` (which showed the gap, if it is one to
    deliver); ``resync``: start the resync task (none is running)."""

    event: Event | None
    name: str
    resync: bool


@attrs.define  # built per frame: not frozen, for the cost (owc.protocol.events, above ChatEvent)
class Deliver:
    """An event to hand to the handler; ``name`` for the log if the handler fails on it."""

    event: Event
    name: str


class ConnectionMachine:
    """One connection's state from hello-ok to close. ``receive(message)`` for every message, in order; it answers
    ``None`` (nothing to do), ``Deliver``, ``Answered`` or ``Lost``."""

    def __init__(self, *, label: str, max_payload: int) -> None:
        self.label = label
        self.max_payload = max_payload
        self.seq = SeqTracker()
        self.decoder = EventDecoder()
        self.active = ActiveRuns()
        self.pending: dict[str, Pending] = {}
        self.frames = 0  # frames received so far: a position in the stream
        self.gaps = 0
        self.last_gap_at = 0  # the position of the latest gap
        self.last_ts = 0  # the newest Gateway timestamp (ms) any event on this connection carried
        self.notice: Shutdown | None = None
        self.resyncs = 0
        self.resync_running = False

    # ------------------------------------------------------------------ requests

    def request(self, method: str, params: Any) -> tuple[str, bytes]:
        """A new request: its id and its frame. Raises ``RequestTooLarge`` (nothing is registered then)."""
        request_id = str(uuid.uuid4())
        data = encode_frame(Request(id=request_id, method=method, params=params))
        if len(data) > self.max_payload:
            raise RequestTooLarge(method, len(data), self.max_payload)
        self.pending[request_id] = Pending(method)
        return request_id, data

    def done(self, request_id: str) -> Pending | None:
        """The request is over (answered, timed out, cancelled): forget it; returns what it got."""
        return self.pending.pop(request_id, None)

    # ------------------------------------------------------------------ receiving

    def receive(self, message: str | bytes) -> Deliver | Answered | Lost | None:
        self.frames += 1
        try:
            frame = decode_frame(message, max_payload=self.max_payload)
        except ProtocolError as exc:
            log.error("gateway.bad_frame url=%s error=%s", self.label, exc)
            if isinstance(exc, FrameTooLarge):
                return self._refuse_reply(message, exc)
            return None
        if type(frame) is Response:
            return self._resolve(frame)
        if type(frame) is not EventFrame:
            log.error("gateway.bad_frame url=%s error=a request frame from the gateway", self.label)
            return None
        try:
            event = self.decoder.decode(frame)
        except ProtocolError as exc:
            # Not fed to the seq tracker: the event is lost to owc, so the next good one reports a gap and
            # the resync recovers what it said (and a bogus seq cannot blind gap detection).
            log.error("gateway.bad_event url=%s seq=%s error=%s", self.label, frame.seq, exc)
            return None
        ts = getattr(event, "ts", None)
        if type(ts) is int and ts > self.last_ts:
            self.last_ts = ts  # the Gateway's clock, from ticks too: how far this connection's view reaches
        seq = frame.seq
        tracker = self.seq
        if seq is not None and seq == tracker.last + 1:  # in order: the tracker's own rule, without its result
            tracker.last = seq
            return self._deliverable(event, frame.event)
        result = tracker.feed(seq)
        if not result.is_gap:
            return self._deliverable(event, frame.event)
        self.gaps += 1
        # What this run said before the gap and after it are no longer known to be adjacent: a new epoch, stamped
        # on the event that showed the gap too (``ChatEvent.epoch``: its renderer then reads the snapshot).
        epoch = self.decoder.new_epoch()
        if type(event) is ChatEvent:
            event = attrs.evolve(event, epoch=epoch)
        log.log(
            logging.ERROR if result.absurd else logging.WARNING,
            "gateway.seq_gap url=%s expected=%s received=%s missed=%s kind=%s",
            self.label,
            result.expected,
            result.received,
            result.missed,
            "absurd" if result.absurd else result.status.value,
        )
        resync = self.want_resync()
        deliver = self._deliverable(event, frame.event)
        if deliver is None:
            return Lost(None, frame.event, resync)
        return Lost(deliver.event, deliver.name, resync)

    def _deliverable(self, event: Event, name: str) -> Deliver | None:
        kind = type(event)
        if kind is AgentEvent or kind is ChatEvent:  # nearly every frame: straight to the tracker and the handler
            self.active.observe(event, self.frames)
            return Deliver(event, name)
        if isinstance(event, ConnectChallenge):
            return None
        if isinstance(event, Tick):
            # Not a run's event; the handler may still act on it (a message the database would not take is
            # tried again on the next tick: the Gateway's own heartbeat, not a clock of owc's).
            return Deliver(event, "tick")
        if isinstance(event, Shutdown):
            self.notice = event
            log.info(
                "gateway.shutdown_notice url=%s reason=%s restart_expected_ms=%s",
                self.label,
                event.reason,
                event.restart_expected_ms,
            )
        self.active.observe(event, self.frames)
        return Deliver(event, name)

    def _resolve(self, response: Response) -> Answered | None:
        pending = self.pending.get(response.id)
        if pending is None:
            log.warning("gateway.unexpected_response id=%s", response.id[:64])
            return None
        pending.response = response
        pending.position = self.frames
        return Answered(response.id)

    def _refuse_reply(self, data: str | bytes, error: FrameTooLarge) -> Answered | None:
        """A frame too large to parse: if it is a reply to a pending request, fail that request now rather
        than let it wait out its timeout."""
        request_id = response_id(data)
        pending = self.pending.get(request_id) if request_id is not None else None
        if pending is None or request_id is None:
            return None
        pending.too_large = error
        pending.position = self.frames
        return Answered(request_id)

    # ------------------------------------------------------------------ resyncs

    def want_resync(self) -> bool:
        """Note a gap; True when a resync task must be started. One runs at a time: it covers every gap
        whose frames came before its list's response, and lists once more only for a gap after that."""
        self.last_gap_at = self.frames
        if self.resync_running:
            return False
        self.resync_running = True
        return True

    def resync(
        self,
        rows: Iterable[SessionRow],
        reason: str,
        *,
        complete: bool = True,
        position: int | None = None,
        unreadable_keys: Iterable[str] = (),
    ) -> Resync:
        """A list (the hello's, or a gap's): what it changes about the runs believed active."""
        return self.active.resync(rows, reason, complete=complete, position=position, unreadable_keys=unreadable_keys)

    def resync_listing(self) -> None:
        """The resync task asks for a list."""
        self.resyncs += 1

    def resync_covers(self, position: int) -> bool:
        """The list answered at ``position`` covers every gap so far: the resync task may end."""
        return self.last_gap_at <= position

    def resync_ended(self) -> None:
        self.resync_running = False


class Handshake:
    """The handshake's frames: ``connect.challenge`` first, then the ``connect`` request, then its reply (events
    before it are tolerated, not delivered)."""

    def __init__(self) -> None:
        self.request_id = str(uuid.uuid4())

    @staticmethod
    def challenge(message: str | bytes) -> EventFrame:
        frame = decode_frame(message)
        if not isinstance(frame, EventFrame) or frame.event != "connect.challenge":
            raise ProtocolError("the gateway did not open with connect.challenge")
        return frame

    def connect(self, params: dict[str, Any]) -> bytes:
        return encode_frame(Request(id=self.request_id, method="connect", params=params))

    def reply(self, message: str | bytes) -> Response | None:
        """The ``connect`` reply, or None for a frame to skip (keep reading)."""
        frame = decode_frame(message)
        if isinstance(frame, Response) and frame.id == self.request_id:
            return frame
        return None
