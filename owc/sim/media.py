"""Files the agent makes, as the real Gateway 2026.9.6 delivers them (``docs/measured/media-2026.9.6.md``).

What the simulator models, so that owc's media desk meets here what it meets there:

* a run's ``Media`` step (``script.Media``, ``SimRun.media``) is a standalone ``MEDIA:<name>`` line of the model's
  final answer: the run's ``agent`` ``assistant`` stream says ``mediaUrls`` (the raw names), the ``chat`` text never
  holds the line, and a reply of files alone ends with a bare ``chat final`` (section 0.3, 0.5);
* after the run's final (``media_delay`` later on Trio's clock: 0.1 to 2.4 s live) the run's last assistant
  transcript message is rewritten: its text plus one block per file (``image`` / ``audio`` / ``attachment``, or
  ``attachment_error`` for a file the Gateway refused), announced by ``sessions.changed phase:"message"`` with no
  ``messageId`` (section 2: the rewrite's own push carried none);
* ``artifacts.download`` answers a managed file's summary and a ticket URL, never bytes (section 4), and the ticket
  URL is served over plain HTTP (or TLS) on the WebSocket's own port (``server.py``'s listener, ``http_answer``):
  the ticket is an HMAC with a per-boot random secret, lives 300 s on the Gateway's clock and dies with the process
  (a restart: a new ``boot_id`` means a new secret); the files themselves persist, as the managed originals do.

The Gateway's own policy (re-encoding, size caps, which types it refuses) is not modelled: a script says what the
Gateway did with each file (``refused``: the ``attachment_error`` code)."""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import logging
import secrets
import struct
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import attrs
import orjson

log = logging.getLogger("owc.sim")

#: ``MANAGED_OUTGOING_IMAGE_TICKET_TTL_MS`` (section 0.6): a ticket's life on the Gateway's clock.
TICKET_TTL_MS = 300_000
#: The managed route (Gateway-relative), ``<encodeURIComponent(sessionKey)>/<uuid>/full`` after it.
ROUTE = "/api/chat/media/outgoing/"
#: What the route answers without a ticket (measured, section 5).
UNAUTHORIZED = b'{"error":{"message":"Unauthorized","type":"unauthorized"}}'
NOT_FOUND = b'{"error":{"message":"Not Found","type":"not_found"}}'


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def kind_of(mime: str) -> str:
    """The block a type becomes: ``image`` for image/*, ``audio`` for audio/*, else a document ``attachment``."""
    major = mime.split("/", 1)[0].lower()
    return major if major in ("image", "audio") else "document"


def png_size(data: bytes) -> tuple[int, int] | None:
    """A PNG's width and height from its IHDR (what the image block declares); None for anything else."""
    if len(data) >= 24 and data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    return None


def encode_key(session_key: str) -> str:
    """``encodeURIComponent(sessionKey)``, as the Gateway builds the URL."""
    return urllib.parse.quote(session_key, safe="-_.!~*'()")


@attrs.frozen
class SimFile:
    """A managed file: its artifact id and the uuid in its URL, whose session and run it belongs to, its bytes."""

    artifact_id: str
    attachment_id: str
    session_key: str
    run_id: str
    name: str
    mime: str
    data: bytes

    @property
    def kind(self) -> str:
        return kind_of(self.mime)

    @property
    def url(self) -> str:
        return f"{ROUTE}{encode_key(self.session_key)}/{self.attachment_id}/full"

    def block(self) -> dict[str, Any]:
        """The transcript block the rewrite adds for it (section 3's shapes)."""
        size = len(self.data)
        if self.kind == "image":
            block: dict[str, Any] = {
                "type": "image", "artifactId": self.artifact_id, "url": self.url, "openUrl": self.url,
                "alt": self.name, "mimeType": self.mime,
            }  # fmt: skip
            dims = png_size(self.data)
            if dims is not None:
                block["width"], block["height"] = dims
            block["sizeBytes"] = size
            return block
        if self.kind == "audio":
            return {
                "type": "audio", "artifactId": self.artifact_id, "url": self.url, "openUrl": self.url,
                "fileName": self.name, "mimeType": self.mime, "playback": "native", "sizeBytes": size,
            }  # fmt: skip
        attachment = {
            "artifactId": self.artifact_id, "url": self.url, "kind": "document", "label": self.name,
            "mimeType": self.mime, "sizeBytes": size,
        }  # fmt: skip
        return {"type": "attachment", "attachment": attachment}

    def summary(self) -> dict[str, Any]:
        """``artifacts.download``'s ``artifact`` (section 4)."""
        kind = {"image": "image", "audio": "audio"}.get(self.kind, "file")
        return {
            "id": self.artifact_id, "type": kind, "title": self.name, "mimeType": self.mime,
            "sizeBytes": len(self.data), "sessionKey": self.session_key, "runId": self.run_id,
            "download": {"mode": "url"},
        }  # fmt: skip


def refused_block(name: str, mime: str, code: str) -> dict[str, Any]:
    """``attachment_error`` for a file the Gateway would not deliver: its base name and code, never a path."""
    attachment: dict[str, Any] = {"code": code, "kind": kind_of(mime) if mime else "document", "label": name}
    if mime:
        attachment["mimeType"] = mime
    return {"type": "attachment_error", "attachment": attachment}


class ArtifactNotFound(Exception):
    """``artifacts.download`` of an id the session does not have (another session's, or none)."""


@attrs.define
class MediaStore:
    """The Gateway's managed media: the files by artifact id, and the tickets that open them over HTTP.
    ``boot_id`` reads the running process's identity: a new boot draws a new secret, so every older ticket dies."""

    now_ms: Callable[[], int]
    boot_id: Callable[[], str]
    files: dict[str, SimFile] = attrs.field(factory=dict)
    _secret: bytes = b""
    _secret_boot: str | None = None
    #: Ticket GETs answered, by status: what a test reads (the simulator's own record, no clock).
    served: list[tuple[str, int]] = attrs.field(factory=list)

    def _key(self) -> bytes:
        boot = self.boot_id()
        if boot != self._secret_boot:
            self._secret, self._secret_boot = secrets.token_bytes(32), boot
        return self._secret

    def add(self, session_key: str, run_id: str, name: str, mime: str, data: bytes) -> SimFile:
        """Keep a delivered file (the managed copy) and return it."""
        attachment = str(uuid.uuid4())
        prefix = "artifact_managed_image_" if kind_of(mime) == "image" else "artifact_managed_media_"
        item = SimFile(prefix + attachment, attachment, session_key, run_id, name, mime, bytes(data))
        self.files[item.artifact_id] = item
        return item

    def ticket(self, item: SimFile, exp_ms: int) -> str:
        payload = {
            "scope": "managed-outgoing-image", "sessionKey": item.session_key, "attachmentId": item.attachment_id,
            "variant": "full", "exp": exp_ms,
        }  # fmt: skip
        body = _b64(orjson.dumps(payload))
        mac = hmac.new(self._key(), f"v1.{body}".encode(), hashlib.sha256).digest()
        return f"v1.{body}.{_b64(mac)}"

    def download(self, session_key: str, artifact_id: str) -> dict[str, Any]:
        """``artifacts.download``'s answer for a managed file: the summary, the ticket URL and its expiry."""
        item = self.files.get(artifact_id)
        if item is None or item.session_key != session_key:
            raise ArtifactNotFound(artifact_id)
        exp = self.now_ms() + TICKET_TTL_MS
        expires = datetime.datetime.fromtimestamp(exp / 1000, datetime.UTC)
        url = f"{item.url}?mediaTicket={self.ticket(item, exp)}"
        return {
            "artifact": item.summary(),
            "url": url,
            "expiresAt": expires.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }

    def _valid(self, ticket: str, key: str, attachment: str) -> bool:
        parts = ticket.split(".")
        if len(parts) != 3 or parts[0] != "v1":
            return False
        want = hmac.new(self._key(), f"v1.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(_unb64(parts[2]), want):
                return False
            payload = orjson.loads(_unb64(parts[1]))
        except (binascii.Error, ValueError, orjson.JSONDecodeError):
            return False
        return (
            isinstance(payload, dict)
            and payload.get("scope") == "managed-outgoing-image"
            and payload.get("sessionKey") == key
            and payload.get("attachmentId") == attachment
            and payload.get("variant") == "full"
            and isinstance(payload.get("exp"), int)
            and payload["exp"] > self.now_ms()
        )

    def http_answer(self, method: str, target: str) -> tuple[int, list[tuple[str, str]], bytes]:
        """The answer to one HTTP request on the Gateway's port that is not a WebSocket upgrade: the managed route
        with a valid ticket gives the bytes (``HEAD``: the headers only); no ticket 401; a bad or expired ticket or
        an unknown file 404; any other route or method 404."""
        parts = urllib.parse.urlsplit(target)
        status, headers, body = self._answer(method, parts)
        self.served.append((parts.path, status))
        log.info("sim.media_http method=%s status=%d bytes=%d", method, status, len(body))
        if status != 200:
            headers = [("content-type", "application/json; charset=utf-8")]
        headers = [*headers, ("content-length", str(len(body)))]
        return status, headers, b"" if method == "HEAD" else body

    def _answer(self, method: str, parts: urllib.parse.SplitResult) -> tuple[int, list[tuple[str, str]], bytes]:
        if method not in ("GET", "HEAD") or not parts.path.startswith(ROUTE):
            return 404, [], NOT_FOUND
        segments = parts.path[len(ROUTE) :].split("/")
        if len(segments) != 3 or segments[2] != "full":
            return 404, [], NOT_FOUND
        key, attachment = urllib.parse.unquote(segments[0]), segments[1]
        tickets = urllib.parse.parse_qs(parts.query).get("mediaTicket")
        if not tickets:
            return 401, [], UNAUTHORIZED
        item = next((f for f in self.files.values() if f.attachment_id == attachment and f.session_key == key), None)
        if item is None or not self._valid(tickets[0], key, attachment):
            return 404, [], NOT_FOUND
        disposition = "attachment" if item.kind == "document" else "inline"
        filename = item.name.encode("ascii", "replace").decode("ascii").replace('"', "")
        headers = [
            ("content-type", item.mime),
            ("content-disposition", f'{disposition}; filename="{filename}"'),
            ("cache-control", "private, max-age=300, immutable"),
            ("accept-ranges", "bytes"),
            ("etag", f'"{hashlib.sha256(item.data).hexdigest()[:32]}"'),
        ]
        return 200, headers, item.data
