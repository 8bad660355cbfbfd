"""What owc accepts of a file the agent made (issue 28), pure: no Trio, no I/O.

OpenClaw 2026.9.6 puts each file an agent delivers into the transcript as a block with an ``artifactId``, a
``mimeType``, a ``sizeBytes`` and a label (docs/measured/media-2026.9.6.md, sections 0 and 10). owc gets its bytes
with one HTTP GET of a ticket URL on the Gateway's own origin and stores them in Open WebUI, where the chat's user
opens them *from Open WebUI's origin*. So everything here answers one question: may these bytes sit in Open
WebUI's file store under this name and this type without harming the person who opens them or the host that keeps
them? The Gateway has its own policy (types, sizes, re-encoding) and owc does not repeat it; owc's is narrower where
Open WebUI's origin needs it (no SVG, no HTML) and where owc's memory needs it (a cap per kind).

The rules, each a function of values (the shell in ``owc.gateway.media_fetch`` does the I/O):

* ``MediaPolicy.decide``: a block's declared type, size and label -> ``Allowed`` (the kind, the canonical type, the
  byte cap to fetch with, the stored file name) or ``Refused`` (the line a person reads);
* ``safe_filename``: the stored name, from the Gateway's label (a base name only, never a path);
* ``download_url``: the absolute URL of a Gateway-relative download URL, beneath the WebSocket URL's origin and
  path prefix, or ``UnsafeDownloadUrl``;
* ``check_response``: the HTTP answer's status and headers against what was announced, before any body is read.

No line built here holds the ticket (the query of the download URL, or the last segment of an
``/api/artifacts/download/`` path): lines name the file, the type, the size or the status, never the URL.
"""

from __future__ import annotations

import enum
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Mapping

import attrs

KiB = 1024
MiB = 1024 * KiB


class MediaKind(enum.Enum):
    """What a delivered file is, by its type: it picks the cap and the name a file without a label gets."""

    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"
    DOCUMENT = "document"


@attrs.frozen
class MediaType:
    """One type owc stores: its kind, the extension a stored name gets when its label has none of ``extensions``,
    and the other extensions a label may keep (``photo.jpeg`` stays ``photo.jpeg``)."""

    mime: str
    kind: MediaKind
    extension: str
    also: tuple[str, ...] = ()

    @property
    def extensions(self) -> tuple[str, ...]:
        return (self.extension, *self.also)


_I, _A, _V, _D = MediaKind.IMAGE, MediaKind.AUDIO, MediaKind.VIDEO, MediaKind.DOCUMENT

#: How a line names a file without a label, and the files of a kind.
_ONE = {_I: "an image", _A: "an audio file", _V: "a video", _D: "a document"}
_MANY = {_I: "images", _A: "audio files", _V: "videos", _D: "documents"}

#: Every type owc stores. Why these and no more:
#:
#: * images: the four every browser shows in an ``<img>`` and none runs script in. Not SVG: an SVG opened from
#:   Open WebUI's file URL is a document in Open WebUI's origin and may carry script (the Gateway refuses SVG too);
#:   not HEIC, AVIF, BMP or TIFF: the Gateway re-encodes what it manages to JPEG or keeps PNG, so they do not come.
#: * audio and video: what an ``<audio>`` / ``<video>`` element plays in current browsers (WAV, MP3, Ogg, WebM, AAC
#:   in MP4 or raw, FLAC; MP4 and WebM video). A container format carries no script.
#: * documents: the Gateway's own managed document list (``MANAGED_DOCUMENT_MIME_TYPES`` in 2026.9.6) less
#:   ``text/html``: a page stored in Open WebUI and opened from its file URL would run its script in Open WebUI's
#:   origin, with the user's session. The rest are either shown as inert text (JSON, CSV, Markdown, plain text, YAML)
#:   or handed to a viewer or the download folder (PDF, Office files, ZIP, and ``application/x-cfb``: the compound
#:   container old Word, Excel and PowerPoint files are detected as).
#:
#: The extensions tie a stored name to its type: Open WebUI (and a person's file manager) may pick a type from the
#: name, so ``page.html`` sent as ``text/plain`` must not be stored as ``page.html`` (it becomes ``page.html.txt``).
MEDIA_TYPES: Mapping[str, MediaType] = {
    t.mime: t
    for t in (
        MediaType("image/png", _I, "png"),
        MediaType("image/jpeg", _I, "jpg", ("jpeg", "jpe")),
        MediaType("image/gif", _I, "gif"),
        MediaType("image/webp", _I, "webp"),
        MediaType("audio/wav", _A, "wav"),
        MediaType("audio/mpeg", _A, "mp3", ("mpga",)),
        MediaType("audio/ogg", _A, "ogg", ("oga", "opus")),
        MediaType("audio/webm", _A, "weba", ("webm",)),
        MediaType("audio/mp4", _A, "m4a", ("mp4",)),
        MediaType("audio/aac", _A, "aac"),
        MediaType("audio/flac", _A, "flac"),
        MediaType("video/mp4", _V, "mp4", ("m4v",)),
        MediaType("video/webm", _V, "webm"),
        MediaType("application/pdf", _D, "pdf"),
        MediaType("application/json", _D, "json"),
        MediaType("application/msword", _D, "doc", ("dot",)),
        MediaType("application/vnd.ms-excel", _D, "xls"),
        MediaType("application/vnd.ms-powerpoint", _D, "ppt"),
        MediaType("application/vnd.openxmlformats-officedocument.wordprocessingml.document", _D, "docx"),
        MediaType("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", _D, "xlsx"),
        MediaType("application/vnd.openxmlformats-officedocument.presentationml.presentation", _D, "pptx"),
        MediaType("application/x-cfb", _D, "cfb", ("doc", "xls", "ppt")),
        MediaType("application/yaml", _D, "yaml", ("yml",)),
        MediaType("application/zip", _D, "zip"),
        MediaType("text/csv", _D, "csv"),
        MediaType("text/markdown", _D, "md", ("markdown",)),
        MediaType("text/plain", _D, "txt", ("text", "log")),
    )
}

#: Other names of the same types, as servers and detectors write them: a declared type and an answer's
#: ``content-type`` are both read through this, so ``image/jpg`` announced and ``image/jpeg`` served agree.
MIME_ALIASES: Mapping[str, str] = {
    "image/jpg": "image/jpeg",
    "image/pjpeg": "image/jpeg",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-m4a": "audio/mp4",
    "audio/m4a": "audio/mp4",
    "audio/x-aac": "audio/aac",
    "audio/x-flac": "audio/flac",
    "application/x-yaml": "application/yaml",
    "text/yaml": "application/yaml",
    "text/x-yaml": "application/yaml",
    "application/x-zip-compressed": "application/zip",
    "text/x-markdown": "text/markdown",
}

#: Why a type is refused, where the reason is not just "not on the list": said in the line a person reads.
REFUSED_BECAUSE: Mapping[str, str] = {
    "image/svg+xml": "an SVG image can carry script",
    "text/html": "a web page would run its script inside Open WebUI",
    "application/xhtml+xml": "a web page would run its script inside Open WebUI",
}

#: Images: the Gateway's own limit for a managed image (``DEFAULT_MANAGED_IMAGE_ATTACHMENT_LIMITS.maxBytes``) and
#: what its client doc tells a client to enforce ("a 12 MiB source limit"): larger never comes from a sound Gateway.
IMAGE_CAP = 12 * MiB
#: Audio and video: the Gateway's managed audio/video limit.
AUDIO_VIDEO_CAP = 16 * MiB
#: Documents: the Gateway allows 100 MiB, but its staging caps every local file at ``mediaMaxMb`` (5 MiB by
#: default: a 6 MiB PDF was refused, measured) and owc holds a file whole in memory between the fetch and Open
#: WebUI's store. 32 MiB leaves room for a raised ``mediaMaxMb``; an owner may set another (``MediaPolicy``).
DEFAULT_DOCUMENT_CAP = 32 * MiB

#: The longest stored file name, in UTF-8 bytes (file systems allow 255; Open WebUI prefixes a UUID to it).
MAX_FILENAME_BYTES = 120
#: The longest name a refusal line shows, in characters.
MAX_SHOWN_NAME = 80

#: The routes a download URL from ``artifacts.download`` may name: the managed files' ticket route and the
#: tool-result images' connection-bound route (``transport: "http"``). Nothing else on the Gateway is fetched.
DOWNLOAD_ROUTES = ("/api/chat/media/outgoing/", "/api/artifacts/download/")
#: A download URL longer than this is refused (the Gateway's are about 300 characters).
MAX_DOWNLOAD_URL = 4096

_TOKEN = r"[a-z0-9!#$&^_.+-]+"
_MIME = re.compile(rf"{_TOKEN}/{_TOKEN}")
_ENCODING = re.compile(_TOKEN)
#: Characters a stored name never holds: path separators and what Windows or a quoted header cannot take.
_RESERVED = re.compile(r'[/\\<>:"|?*]')
_SPACES = re.compile(r"\s+")


# ---------------------------------------------------------------------------------------------------- types


def normalize_mime(value: object) -> str | None:
    """A type as owc compares it: parameters dropped (``; charset=...``), lower case, aliases resolved; None when
    ``value`` is not a ``type/subtype`` at all (so it can be named safely in a line: None reads "no valid type")."""
    if not isinstance(value, str):
        return None
    bare = value.split(";", 1)[0].strip().lower()
    if not _MIME.fullmatch(bare):
        return None
    return MIME_ALIASES.get(bare, bare)


def media_type(mime: object) -> MediaType | None:
    """The ``MediaType`` owc stores ``mime`` as (aliases resolved), or None when owc does not store that type."""
    normalized = normalize_mime(mime)
    return MEDIA_TYPES.get(normalized) if normalized is not None else None


# ---------------------------------------------------------------------------------------------------- names


def clean_name(label: object) -> str:
    """The base name in a Gateway label, made harmless, possibly empty: NFKC (so a look-alike slash or dot leader
    becomes the character it imitates, and is then treated as one), the part after the last ``/`` or ``\\``, no
    control, format (bidirectional overrides, zero-width), surrogate or private-use character, no character a path
    or a quoted header gives meaning to (``<>:"|?*`` become ``_``), whitespace runs as one space, no leading or
    trailing dots and spaces (so ``..``, ``.bashrc`` and ``x.`` cannot be a hidden file, a parent or a Windows
    trap). Not cut to length: ``safe_filename`` and ``shown_name`` do, each to its own limit."""
    if not isinstance(label, str):
        return ""
    text = unicodedata.normalize("NFKC", label).replace("\\", "/").rpartition("/")[2]
    text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("C"))
    text = _SPACES.sub(" ", _RESERVED.sub("_", text))
    return text.strip(". ")


def _cut_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, on a character boundary."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore")


def safe_filename(label: object, mime: str) -> str:
    """The name owc stores a file of type ``mime`` under: ``clean_name`` of the label, its extension kept when it is
    one of the type's (lower-cased), else the type's own appended (``x.svg`` sent as PNG is ``x.svg.png``: the last
    extension is what picks a program or a served type); the kind (``image.png``) when nothing of the label is left;
    at most ``MAX_FILENAME_BYTES``, cut in the stem so the extension stays. ``ValueError`` for a type owc does not
    store (``decide`` first)."""
    media = media_type(mime)
    if media is None:
        raise ValueError("safe_filename: a type owc does not store")
    name = clean_name(label)
    stem, dot, ext = name.rpartition(".")
    if dot and stem and ext.lower() in media.extensions:
        ext = ext.lower()
    else:
        stem, ext = name, media.extension
    stem = _cut_utf8(stem, MAX_FILENAME_BYTES - len(ext) - 1).rstrip(". ")
    return f"{stem or media.kind.value}.{ext}"


def shown_name(label: object, fallback: str = "a file") -> str:
    """The file's name as a line shows it: ``clean_name``, shortened with an ellipsis past ``MAX_SHOWN_NAME``
    characters, ``fallback`` when nothing is left."""
    name = clean_name(label)
    if len(name) > MAX_SHOWN_NAME:
        name = name[: MAX_SHOWN_NAME - 1].rstrip(". ") + "…"
    return name or fallback


def format_size(size: int) -> str:
    """A size as a person reads it: ``844 bytes``, ``1.5 KiB``, ``40 MiB`` (one decimal at most)."""
    if size < KiB:
        return "1 byte" if size == 1 else f"{size} bytes"
    value, unit = (size / MiB, "MiB") if size >= MiB else (size / KiB, "KiB")
    return f"{value:.1f}".rstrip("0").rstrip(".") + f" {unit}"


def _over(size: int, cap: int) -> tuple[str, str]:
    """``size`` and ``cap`` as a line shows them side by side: exact bytes when rounding would make them look
    equal (``32 MiB, over the 32 MiB limit`` says nothing)."""
    size_text, cap_text = format_size(size), format_size(cap)
    if size_text == cap_text:
        return f"{size:,} bytes", f"{cap_text} ({cap:,} bytes)"
    return size_text, cap_text


def not_stored(name: str, why: str) -> str:
    """The one line a person reads about a file owc did not store."""
    return f"{name} was not stored: {why}"


# ---------------------------------------------------------------------------------------------------- decide


@attrs.frozen
class Allowed:
    """owc may store the file: fetch at most ``cap`` bytes, check the answer is ``mime``, store it as ``filename``.
    ``size`` is the declared size, when the block gave one."""

    kind: MediaKind
    mime: str
    cap: int
    filename: str
    size: int | None


@attrs.frozen
class Refused:
    """owc does not store the file; ``reason`` is the line a person reads (the file's name and why)."""

    reason: str


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attribute.name} must be a positive number of bytes")


@attrs.frozen
class MediaPolicy:
    """The caps owc fetches with. Images and audio/video follow the Gateway's own limits (fixed); documents have
    an owner's maximum (``document_cap``)."""

    document_cap: int = attrs.field(default=DEFAULT_DOCUMENT_CAP, validator=_positive)

    def cap_for(self, kind: MediaKind) -> int:
        """owc's limit for files of ``kind``."""
        if kind is MediaKind.IMAGE:
            return IMAGE_CAP
        if kind is MediaKind.DOCUMENT:
            return self.document_cap
        return AUDIO_VIDEO_CAP

    def decide(self, mime: object, size: object, label: object) -> Allowed | Refused:
        """Whether owc stores a block's file, from what the block declares: its ``mimeType``, its ``sizeBytes``
        (None when absent) and its label (``label``, ``fileName`` or ``alt``; None when absent). Refused: no
        valid type, a type owc does not store, an invalid size, or a size over the kind's cap. The cap of an
        ``Allowed`` is never more than the declared size: a body longer than announced is refused as too large."""
        declared = normalize_mime(mime)
        media = MEDIA_TYPES.get(declared) if declared is not None else None
        if media is None:
            name = shown_name(label)
            if declared is None:
                return Refused(not_stored(name, "the Gateway gave no valid file type for it"))
            why = REFUSED_BECAUSE.get(declared)
            return Refused(
                not_stored(name, f"owc does not store files of type {declared}" + (f" ({why})" if why else ""))
            )
        name = shown_name(label, fallback=_ONE[media.kind])
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            return Refused(not_stored(name, "the Gateway gave an invalid size for it"))
        cap = self.cap_for(media.kind)
        if size is not None and size > cap:
            size_text, cap_text = _over(size, cap)
            return Refused(not_stored(name, f"it is {size_text}, over owc's {cap_text} limit for {_MANY[media.kind]}"))
        return Allowed(
            kind=media.kind,
            mime=media.mime,
            cap=cap if size is None else min(cap, size),
            filename=safe_filename(label, media.mime),
            size=size,
        )


DEFAULT_POLICY = MediaPolicy()


# ---------------------------------------------------------------------------------------------------- the URL


class UnsafeDownloadUrl(ValueError):
    """A download URL owc will not fetch (not one of the Gateway's download routes, a host or scheme of its own, a
    ``..``), or a Gateway URL no origin can be derived from. Its text says what is wrong and never quotes the URL
    (its query is the ticket)."""


_HTTP_SCHEME = {"ws": "http", "wss": "https"}


def _gateway_origin(ws_url: str) -> tuple[str, str]:
    """``(http origin, path prefix)`` of the Gateway WebSocket URL: ``ws`` -> ``http``, ``wss`` -> ``https``, the
    same host and port, the path without its trailing ``/`` (a reverse proxy's mount, ``/openclaw``); the
    userinfo and the query are dropped (either may hold a credential, and the ticket is the only one sent)."""
    if not isinstance(ws_url, str) or not ws_url.isascii() or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in ws_url):
        raise UnsafeDownloadUrl("the Gateway URL is not a plain ASCII URL")
    try:
        parts = urllib.parse.urlsplit(ws_url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
    except ValueError:
        raise UnsafeDownloadUrl("the Gateway URL has an invalid host or port") from None
    scheme = _HTTP_SCHEME.get(parts.scheme.lower())
    if scheme is None:
        raise UnsafeDownloadUrl("the Gateway URL is not ws:// or wss://")
    if not parts.hostname:
        raise UnsafeDownloadUrl("the Gateway URL has no host")
    hostport = parts.netloc.rpartition("@")[2]
    prefix = parts.path.rstrip("/")
    if "\\" in prefix or ".." in prefix.split("/"):
        raise UnsafeDownloadUrl("the Gateway URL's path is not a plain path")
    return f"{scheme}://{hostport.lower()}", prefix


def _route_of(path: str) -> str | None:
    return next((route for route in DOWNLOAD_ROUTES if path.startswith(route)), None)


def _check_relative(relative_url: object) -> str:
    """``relative_url`` itself when it is a download route on the Gateway, else ``UnsafeDownloadUrl`` saying why."""
    if not isinstance(relative_url, str) or not relative_url:
        raise UnsafeDownloadUrl("the download URL is empty")
    if len(relative_url) > MAX_DOWNLOAD_URL:
        raise UnsafeDownloadUrl("the download URL is too long")
    if not relative_url.isascii() or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in relative_url):
        raise UnsafeDownloadUrl("the download URL holds a space, a control or a non-ASCII character")
    if "\\" in relative_url:
        raise UnsafeDownloadUrl("the download URL holds a backslash")
    if "#" in relative_url:
        raise UnsafeDownloadUrl("the download URL holds a fragment")
    if relative_url.startswith("//"):
        raise UnsafeDownloadUrl("the download URL names a host of its own")
    if not relative_url.startswith("/"):
        raise UnsafeDownloadUrl("the download URL is not a path on the Gateway (it has a scheme or a host)")
    path = relative_url.partition("?")[0]
    route = _route_of(path)
    if route is None:
        raise UnsafeDownloadUrl("the download URL is not one of the Gateway's download routes")
    if len(path) == len(route):
        raise UnsafeDownloadUrl("the download URL names no file")
    if "//" in path:
        raise UnsafeDownloadUrl("the download URL has an empty path segment")
    # Decoded until it no longer changes (a bounded number of times): a server or a proxy on the way may decode
    # once more than the standard says, so ``%252e%252e`` is refused as surely as ``..``.
    decoded = path
    for _ in range(4):
        if any(seg in (".", "..") for seg in decoded.split("/")):
            raise UnsafeDownloadUrl("the download URL climbs out of its route (a . or .. segment)")
        if any(ch in decoded for ch in "\\\x00\r\n"):
            raise UnsafeDownloadUrl("the download URL holds an encoded backslash or control character")
        try:
            more = urllib.parse.unquote(decoded, errors="strict") if "%" in decoded else decoded
        except UnicodeDecodeError:
            raise UnsafeDownloadUrl("the download URL's percent-encoding is not UTF-8") from None
        if more == decoded:
            break
        decoded = more
    else:
        raise UnsafeDownloadUrl("the download URL is encoded too many times over")
    return relative_url


def download_url(ws_url: str, relative_url: str) -> str:
    """The absolute URL owc fetches for ``relative_url`` (an ``artifacts.download`` answer's ``url``): the
    Gateway's HTTP origin (the WebSocket URL's host and port, ``ws`` -> ``http``, ``wss`` -> ``https``) and, behind
    a reverse proxy, its path prefix (``wss://gw.example/openclaw`` -> ``https://gw.example/openclaw/api/...``), as
    the Gateway's docs resolve it. ``UnsafeDownloadUrl`` for anything but a path on one of ``DOWNLOAD_ROUTES``: no
    scheme, no host, no ``//``, no backslash, no control character, no ``.`` or ``..`` segment (also after
    percent-decoding), no fragment. A hostile or broken Gateway cannot point owc at another host or route."""
    origin, prefix = _gateway_origin(ws_url)
    return f"{origin}{prefix}{_check_relative(relative_url)}"


def shown_url(url: str) -> str:
    """What a log line may show of a download URL: the origin, the path prefix and the route, then ``…`` (the
    rest names the session, the file and, in the query or the last segment, the ticket)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    for route in DOWNLOAD_ROUTES:
        at = parts.path.find(route)
        if at >= 0:
            return f"{origin}{parts.path[: at + len(route)]}…"
    return f"{origin}/…"


# ---------------------------------------------------------------------------------------------------- the answer


class Problem(enum.Enum):
    """What is wrong with an HTTP answer, as the fetch's caller acts on it."""

    REDIRECT = "redirect"  # a 3xx: owc follows no redirect (the ticket would go where the Gateway did not say)
    TICKET = "ticket"  # 401, 403, 404, 410: the ticket was refused or has expired: ask for a new one, once
    STATUS = "status"  # any other status but 200 (a 5xx may pass; a 206 was never asked for)
    WRONG_TYPE = "wrong_type"  # not the announced type
    ENCODED = "encoded"  # a content-encoding other than identity (never asked for; would be stored compressed)
    TOO_LARGE = "too_large"  # a content-length over the cap
    UNFRAMED = "unframed"  # no length and not chunked, or a length that is no number: truncation undetectable


#: The statuses that mean "this ticket is no good": the Gateway answers 401 without a valid one, 404 for a
#: connection-bound ticket whose connection closed (measured); 403 and 410 are what a proxy or a later Gateway may
#: say for the same.
TICKET_STATUSES = frozenset({401, 403, 404, 410})


@attrs.frozen
class BadResponse:
    """An HTTP answer owc does not take the body of; ``line`` says why, in words for a person (no URL)."""

    problem: Problem
    line: str
    status: int


def _header_values(headers: Iterable[tuple[bytes | str, bytes | str]], name: str) -> list[str]:
    out = []
    for key, value in headers:
        key_text = key.decode("latin-1") if isinstance(key, bytes) else key
        if key_text.strip().lower() == name:
            out.append((value.decode("latin-1") if isinstance(value, bytes) else value).strip())
    return out


def _shown_type(value: str) -> str:
    normalized = normalize_mime(value)
    return normalized if normalized is not None else "an unreadable type"


def check_response(
    status: int, headers: Iterable[tuple[bytes | str, bytes | str]], *, expect_mime: str, cap: int
) -> BadResponse | None:
    """None when the answer's head allows reading its body: status 200, no ``content-encoding`` but
    ``identity``, a ``content-type`` (parameters dropped, any case, aliases resolved) equal to ``expect_mime``,
    a body framed by a ``content-length`` of at most ``cap`` or by chunked transfer encoding (a body that runs to
    the connection's close cannot be told from a truncated one). Else the ``BadResponse``. The body's length is
    the reader's to count against ``cap`` (a chunked body announces none)."""
    headers = list(headers)
    if 300 <= status < 400:
        return BadResponse(
            Problem.REDIRECT, f"the Gateway answered with a redirect (HTTP {status}), which owc does not follow", status
        )
    if status in TICKET_STATUSES:
        return BadResponse(
            Problem.TICKET, f"the Gateway refused the download ticket or it has expired (HTTP {status})", status
        )
    if status != 200:
        return BadResponse(Problem.STATUS, f"the Gateway answered HTTP {status} instead of the file", status)
    encodings = _header_values(headers, "content-encoding")
    if any(value.lower() != "identity" for value in encodings):
        shown = ", ".join(v.lower() if _ENCODING.fullmatch(v.lower()) else "an unknown encoding" for v in encodings)
        return BadResponse(Problem.ENCODED, f"the Gateway sent it encoded ({shown}), which owc does not accept", status)
    expected = normalize_mime(expect_mime)
    types = _header_values(headers, "content-type")
    if len(types) != 1 or expected is None or normalize_mime(types[0]) != expected:
        sent = "no type" if not types else " and ".join(_shown_type(t) for t in types)
        want = expected or "a valid type"
        return BadResponse(Problem.WRONG_TYPE, f"the Gateway sent {sent} where it had announced {want}", status)
    lengths = {v.strip() for value in _header_values(headers, "content-length") for v in value.split(",")}
    chunked = any(
        "chunked" in (v.strip().lower() for v in value.split(","))
        for value in _header_values(headers, "transfer-encoding")
    )
    if lengths and not chunked:
        if len(lengths) != 1 or not all(v.isascii() and v.isdigit() for v in lengths):
            return BadResponse(Problem.UNFRAMED, "the Gateway's answer gave an invalid length", status)
        length = int(lengths.pop())
        if length > cap:
            size_text, cap_text = _over(length, cap)
            return BadResponse(
                Problem.TOO_LARGE, f"the Gateway announced {size_text}, over the {cap_text} owc accepts for it", status
            )
    elif not chunked:
        return BadResponse(
            Problem.UNFRAMED,
            "the Gateway's answer gave no length (a cut connection could not be told from the end of the file)",
            status,
        )
    return None


def body_too_large(cap: int) -> str:
    """The line for a body that ran past ``cap`` bytes (chunked, or longer than its own length said)."""
    return f"the Gateway sent more than the {format_size(cap)} owc accepts for it"
