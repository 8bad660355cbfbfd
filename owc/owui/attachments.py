"""A user's images and files, as the ``attachments`` of the Gateway's ``chat.send``.

What the real Gateway 2026.9.6 accepts (``~/.cache/owc/realgw/oc/node_modules/openclaw/dist``):

* ``ChatSendParamsSchema.attachments`` is an array of a permissive envelope ``{type?, mimeType?, fileName?,
  origin?: "paste"|"file", content?, sizeBytes?, durationMs?, width?, height?}`` with extra keys allowed
  (``sessions-KsldKmtI.mjs:2168-2180,2229``). The handler keeps only entries whose ``content`` is a string (or
  bytes) or an Anthropic-style ``source: {type: "base64", media_type, data}`` (``attachment-normalize-Bei1203a.mjs:
  287-316``, called at ``chat-send-handler-BlzZtMKP.mjs:5498``). The Control UI sends exactly
  ``{type: "image"|"file", mimeType, fileName, content: <base64 without "data:">}``; owc sends the same.
* ``content`` is base64 only, never a URL. A ``data:<mime>;base64,`` prefix is stripped; the rest must be
  padded, whitespace-free standard base64 (``attachment-normalize-Bei1203a.mjs:156-161,201-202``;
  ``base64-B5EyWEOm.mjs:27-40``), not empty (``:201``).
* The type is sniffed from the bytes (the declared ``mimeType`` and the file name are hints only:
  ``attachment-normalize-Bei1203a.mjs:205-207``). Every type is accepted on ``chat.send`` (``acceptNonImage:
  true``, ``chat-send-handler-BlzZtMKP.mjs:4044``): an image of at most 2 MB goes to a vision model inline, a
  larger one, or any image for a text-only model, and every other file is saved to the Gateway's media store
  and named in the message as ``[media attached: media://inbound/<id>]`` (``attachment-normalize-Bei1203a.mjs:
  208-262``).
* Limits, per attachment, on the decoded size: ``maxBytes`` (``agents.defaults.mediaMaxMb``, default 20 MB,
  capped so one attachment fits a frame) and 6 MB for an image (``:203-204,213``; ``chat-attachment-policy-3-T7Wh4j.
  mjs:5-27``); both are advertised in ``hello-ok.policy.attachments`` (measured ``{maxBytes: 19464192,
  maxImageBytes: 6291456}``, ``message-handler-D5c0StBB.mjs:2419``). The whole request frame must also fit
  ``policy.maxPayload`` (26214400: ``server-constants-Dx_kHnY5.mjs:2``; ``docs/gateway/protocol/handshake.md:
  113-120``).
* One bad attachment fails the whole ``chat.send`` with ``INVALID_REQUEST`` and a message such as ``Error:
  attachment a.png: invalid base64 content`` or ``...: image exceeds size limit (7000000 > 6291456 bytes)``
  (``chat-send-handler-BlzZtMKP.mjs:4081-4082``). So owc checks every limit first and leaves out what would be
  refused, with one line for the user, rather than lose the whole message.
* Measured (``tests/test_realgw_attachments.py``): the user message in ``chat.history`` keeps the text as its
  ``content`` and lists the attachment in ``__openclaw.media`` (``{url: "media://inbound/<name>---<uuid>.png",
  contentType, kind: "image", fileName, sizeBytes}``, with ``__openclaw.mediaImageLayout``).

How Open WebUI 0.12.4 hands them to a Pipe (``open_webui`` in the server venv):

* Images: for a saved chat the messages are reloaded from the database and each raster image file of a user
  message becomes an ``{"type": "image_url", "image_url": {"url": <file id>}}`` part
  (``utils/middleware.py:2124-2142``); ``convert_url_images_to_base64`` then replaces the url with a
  ``data:<type>;base64,...`` URL (``utils/middleware.py:1827-1875,2202``; ``utils/files.py:55-105,209-241``, which
  checks the user's access). A url that could not be read (no access, a missing file, a remote fetch that
  failed) stays as it was: owc does not fetch it (that would bypass the check).
* Files: the page uploads a file and puts ``{type: "file", id, url: <id>, name, content_type, size, file:
  {...}}`` in the user message's ``files`` (``MessageInput.svelte`` ``uploadFileHandler``, from the frontend's
  source maps; ``routers/files.py:320-453``). A Pipe gets the message as ``__metadata__["user_message"]``
  (``main.py:1277,1325``; ``functions.py:227-258``). ``__files__`` (``metadata["files"]``) is not that list: it
  also holds the non-image files of earlier messages of the chat (``Chat.svelte``: ``chatFiles``) and never the
  images, so it would resend old files: use ``message_files(__metadata__)``.
* The bytes of an upload are at the file row's ``path`` (``{UPLOAD_DIR}/{id}_{name}`` for local storage, a local
  copy for S3 and others: ``storage/provider.py:63-77,167-177``). The ``files`` of the request come from the
  page and are not trusted: ``owui_file_reader`` takes the path from Open WebUI's own row and checks the user's
  access the way Open WebUI does before reading a file (``retrieval/utils.py:1532-1538``).

Pure, except ``read_upload`` (the one function that reads a local file) and ``owui_file_reader`` (Open WebUI's
database, imported lazily). Nothing here logs, and no problem line ever holds a file's bytes.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import anyio.to_thread
import attrs

#: ``hello-ok.policy.attachments.maxBytes`` of the real Gateway 2026.9.6 (default config): decoded bytes of one
#: attachment.
MAX_BYTES: Final = 19_464_192
#: ``hello-ok.policy.attachments.maxImageBytes``: decoded bytes of one image.
MAX_IMAGE_BYTES: Final = 6_291_456
#: ``hello-ok.policy.maxPayload``: one request frame, JSON-encoded.
MAX_PAYLOAD: Final = 26_214_400
#: Room kept in the frame for everything but the attachments' base64 (the message, the keys, the names): the
#: Gateway's own reserve when it derives ``maxBytes`` from ``maxPayload`` (``chat-attachment-policy-3-T7Wh4j.mjs:
#: 5``). A caller sending a long text adds its length.
FRAME_RESERVE: Final = 262_144
#: At most this many problem lines, then one that counts the rest (a message with a thousand bad parts).
MAX_PROBLEMS: Final = 8

_NAME_CHARS = 60
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MIME = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_WHITESPACE = re.compile(rb"[\t\n\r\f\v ]")
_B64_ALPHABET = re.compile(rb"^[A-Za-z0-9+/]*={0,2}$")
_TOO_LARGE: Final = object()
_EXTENSIONS: Final = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/bmp": ".bmp",
    "image/tiff": ".tiff",
    "image/x-icon": ".ico",
    "image/avif": ".avif",
    "image/heic": ".heic",
    "image/heif": ".heif",
    "image/jxl": ".jxl",
    "image/vnd.adobe.photoshop": ".psd",
}


@attrs.frozen
class FileRef:
    """An uploaded file of the message that is not an image. No path: the request's own is not trusted."""

    id: str
    name: str
    content_type: str  # as declared (lower case, no parameters), "" if none or malformed
    size: int | None  # as declared: only for leaving out a file too large without reading it


#: Reads an upload's bytes: at most ``limit + 1`` of them (so a file over the limit shows as such), or None if it
#: may not or cannot be read. Called only for the message's own uploads.
FileReader = Callable[[FileRef, int], bytes | None]


def message_files(metadata: Any) -> list[Mapping[str, Any]]:
    """The files of the message being answered: ``__metadata__["user_message"]["files"]`` (``main.py:1277,1325``).
    Not ``__files__``: that one has the chat's earlier files too and none of the images."""
    user_message = metadata.get("user_message") if isinstance(metadata, Mapping) else None
    files = user_message.get("files") if isinstance(user_message, Mapping) else None
    return [f for f in files if isinstance(f, Mapping)] if isinstance(files, list) else []


def file_refs(files: Any) -> list[FileRef]:
    """The message's uploads that go as files (the raster images arrive as ``image_url`` parts of the content)."""
    refs, _, _ = _sort_files(files)
    return refs


def attachments_from(
    message_content: Any,
    files: Any,
    *,
    read: FileReader | None = None,
    max_bytes: int = MAX_BYTES,
    max_image_bytes: int = MAX_IMAGE_BYTES,
    max_payload: int = MAX_PAYLOAD,
    reserve: int = FRAME_RESERVE,
    images_in_content: bool = True,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``chat.send`` attachments for a user message and a line for the user about each part left out.

    ``message_content``: the last user message's ``content`` (a string has no images; a list of parts may hold
    ``image_url``/``input_image`` parts with a ``data:`` URL, and OpenAI ``file`` parts with ``file_data``).
    ``files``: that message's Open WebUI files (``message_files``): its raster images are the content's
    ``image_url`` parts (used here only for their names); its other uploads are read with ``read`` (None: they
    are left out, with a line). The limits are the Gateway's (``hello-ok.policy``): ``max_bytes`` and
    ``max_image_bytes`` per attachment, decoded; all of them together, base64-encoded, within ``max_payload -
    reserve`` (``reserve``: the rest of the request, the message's text included). An image is what its bytes
    say, as the Gateway decides. ``images_in_content`` False: the content has no image parts (the message as the
    request named it, not as Open WebUI rebuilt it), so raster images are read as uploads. Never raises."""
    out = _Collector(max_bytes=max_bytes, max_image_bytes=max_image_bytes, budget=max_payload - reserve)
    try:
        refs, image_names, inline = _sort_files(files, out, images_in_content)
        parts = message_content if isinstance(message_content, list) else []
        n_images = sum(1 for p in parts if isinstance(p, Mapping) and p.get("type") in ("image_url", "input_image"))
        names = iter(image_names if len(image_names) == n_images else [])
        index = 0
        for part in parts:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind in ("text", "input_text"):
                continue
            if kind in ("image_url", "input_image"):
                index += 1
                out.image_part(part, next(names, None), index)
            elif kind == "file":
                index += 1
                out.file_part(part, index)
            else:
                out.problem(f"A part of your message ({_label(kind, 'unknown')}) is not sent to the agent.")
        for part, name in inline:
            index += 1
            out.image_part(part, name, index)
        for ref in refs:
            out.upload(ref, read)
    except Exception:  # a defect here must not cost the user's message: send what is ready, say the rest failed
        out.problem("Some of your files could not be prepared for the agent and were not sent.")
    return out.attachments, out.lines()


def read_upload(path: str | os.PathLike[str], *, root: str | os.PathLike[str], limit: int) -> bytes | None:
    """The bytes of the regular file at ``path`` (at most ``limit + 1``), if it lies inside ``root`` (Open WebUI's
    upload folder) once links are resolved; None otherwise or on any error. The only place owc reads a file of
    Open WebUI's: a path named by a request could otherwise point anywhere (owc's own token, the database)."""
    try:
        base = os.path.realpath(root)
        real = os.path.realpath(path)
        if real == base or os.path.commonpath([real, base]) != base or not stat.S_ISREG(os.stat(real).st_mode):
            return None
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))  # a FIFO must not block
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read(max(0, limit) + 1)
    except (OSError, ValueError, TypeError):
        return None


async def owui_file_reader(files: Any, user: Any, *, max_bytes: int = MAX_BYTES) -> FileReader:
    """A ``FileReader`` for the message's uploads, inside Open WebUI: each file row is looked up by id and read
    only if this user may read it (admin, owner, or ``has_access_to_file``, as Open WebUI's retrieval does:
    ``retrieval/utils.py:1532-1538``), from the row's own path (a local copy from remote storage:
    ``Storage.get_file``), inside Open WebUI's upload folder. ``user``: the Pipe's ``__user__``. Any failure
    makes that file unreadable (a line for the user), never an exception. The reads are blocking: call
    ``attachments_from`` with this reader in a thread (``anyio.to_thread.run_sync``), not on Open WebUI's loop."""
    from open_webui.config import UPLOAD_DIR
    from open_webui.models.files import Files
    from open_webui.models.users import UserModel
    from open_webui.storage.provider import Storage
    from open_webui.utils.access_control.files import has_access_to_file

    paths: dict[str, str] = {}
    try:
        if isinstance(user, UserModel):
            who = user
        else:  # the Pipe's ``__user__`` is ``user.model_dump()``, maybe with ``valves`` added (functions.py:209)
            who = UserModel(**{k: v for k, v in dict(user).items() if k in UserModel.model_fields})
    except Exception:
        return _no_reader
    for ref in file_refs(files):
        try:
            row = await Files.get_file_by_id(ref.id)
            if row is None or not row.path:
                continue
            size = (row.meta or {}).get("size") if isinstance(row.meta, dict) else None
            if isinstance(size, int) and size > max_bytes:  # not fetched from remote storage only to be refused
                continue
            if not (who.role == "admin" or row.user_id == who.id or await has_access_to_file(ref.id, "read", who)):
                continue
            # A local copy from remote storage: blocking, so off the loop (abandoned, as before, on a Stop).
            paths[ref.id] = await anyio.to_thread.run_sync(Storage.get_file, row.path, abandon_on_cancel=True)
        except Exception:
            continue

    def read(ref: FileRef, limit: int) -> bytes | None:
        path = paths.get(ref.id)
        return read_upload(path, root=UPLOAD_DIR, limit=limit) if path else None

    return read


def _no_reader(ref: FileRef, limit: int) -> bytes | None:
    return None


# ---- the parts of the message


@attrs.define
class _Collector:
    max_bytes: int
    max_image_bytes: int
    budget: int
    attachments: list[dict[str, Any]] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    used: int = 0

    def problem(self, line: str) -> None:
        self.problems.append(line)

    def lines(self) -> list[str]:
        if len(self.problems) <= MAX_PROBLEMS:
            return list(self.problems)
        rest = len(self.problems) - (MAX_PROBLEMS - 1)
        return [*self.problems[: MAX_PROBLEMS - 1], f"... and {rest} more parts of your message were not sent."]

    def image_part(self, part: Mapping[str, Any], name: str | None, index: int) -> None:
        raw = part.get("image_url")
        url = raw.get("url") if isinstance(raw, Mapping) else raw
        label = _label(name, f"Image {index}")
        if not isinstance(url, str) or not url.strip():
            self.problem(f"{label}: Open WebUI gave no data for this image, so it was not sent.")
            return
        if url.lstrip()[:5].lower() != "data:":
            self.problem(f"{label}: Open WebUI could not read this image, so it was not sent.")
            return
        limit = min(self.max_image_bytes, self.max_bytes)
        decoded = _data_url(url, limit)
        if decoded is _TOO_LARGE:
            self.problem(f"{label} is larger than the Gateway accepts for an image ({_mb(limit)}).")
            return
        if not isinstance(decoded, tuple):
            self.problem(f"{label}: its data is not valid, so it was not sent.")
            return
        declared, data = decoded
        if not data:
            self.problem(f"{label} is empty, so it was not sent.")
            return
        mime = _sniff_image(data)
        if mime is None:
            what = "SVG images are" if declared == "image/svg+xml" else "this image format is"
            self.problem(f"{label}: {what} not sent to the agent.")
            return
        self.add(data, mime, _file_name(name, f"image-{index}", mime), label)

    def file_part(self, part: Mapping[str, Any], index: int) -> None:
        raw = part.get("file")
        file = raw if isinstance(raw, Mapping) else {}
        name = file.get("filename") if isinstance(file.get("filename"), str) else None
        label = _label(name, f"File {index}")
        url = file.get("file_data")
        if not isinstance(url, str) or url.lstrip()[:5].lower() != "data:":
            self.problem(f"{label}: this file came without its data, so it was not sent.")
            return
        decoded = _data_url(url, self.max_bytes)
        if decoded is _TOO_LARGE:
            self.problem(f"{label} is larger than the Gateway accepts ({_mb(self.max_bytes)}).")
            return
        if not isinstance(decoded, tuple):
            self.problem(f"{label}: its data is not valid, so it was not sent.")
            return
        declared, data = decoded
        self.add_file(data, declared, name or f"file-{index}", label)

    def upload(self, ref: FileRef, read: FileReader | None) -> None:
        label = _label(ref.name, "A file")
        if read is None:
            self.problem(f"{label}: files other than images are not sent to the agent here.")
            return
        if ref.size is not None and ref.size > self.max_bytes:
            self.problem(f"{label} is larger than the Gateway accepts ({_mb(self.max_bytes)}).")
            return
        try:
            data = read(ref, self.max_bytes)
        except Exception:
            data = None
        if not isinstance(data, (bytes, bytearray)):
            self.problem(f"{label}: Open WebUI could not read this file, so it was not sent.")
            return
        self.add_file(bytes(data), ref.content_type, ref.name, label)

    def add_file(self, data: bytes, declared: str, name: str, label: str) -> None:
        """A file the Gateway will sniff: an image if its bytes are one (then the image limit applies). When the
        bytes are no image it knows, the Gateway falls back to the declared type, then the name's extension
        (``mime-1zBUMwu6.mjs:198-210``): a file that claims to be an image but is none (an SVG, a broken or
        renamed file) would reach a vision model as an image and fail the run, so it is left out."""
        if not data:
            self.problem(f"{label} is empty, so it was not sent.")
            return
        image = _sniff_image(data)
        if image is None and (declared.startswith("image/") or _image_extension(name)):
            svg = declared == "image/svg+xml" or name.lower().endswith(".svg")
            self.problem(f"{label}: {'SVG images are' if svg else 'this image format is'} not sent to the agent.")
            return
        mime = image or declared or "application/octet-stream"
        self.add(data, mime, _file_name(name, "file", image), label)

    def add(self, data: bytes, mime: str, file_name: str, label: str) -> None:
        image = mime.startswith("image/")
        limit = min(self.max_image_bytes, self.max_bytes) if image else self.max_bytes
        if len(data) > limit:
            what = " for an image" if image else ""
            self.problem(f"{label} is larger than the Gateway accepts{what} ({_mb(limit)}).")
            return
        # Its share of the frame: its base64, as the Gateway counts when it derives maxBytes from maxPayload (so
        # one attachment of maxBytes fits); the reserve holds the keys, the names and the message's text.
        size = 4 * ((len(data) + 2) // 3)
        if self.used + size > self.budget:
            self.problem(
                f"{label} was not sent: with your other files the message is larger than the Gateway accepts "
                f"at once ({_mb(self.budget)})."
            )
            return
        self.used += size
        self.attachments.append(
            {
                "type": "image" if image else "file",
                "mimeType": mime,
                "fileName": file_name,
                "content": base64.b64encode(data).decode("ascii"),
            }
        )


def _sort_files(
    files: Any, out: _Collector | None = None, images_in_content: bool = True
) -> tuple[list[FileRef], list[str | None], list[tuple[dict[str, Any], str | None]]]:
    """The message's uploads to read, and the names of its raster images (in order: Open WebUI adds their
    ``image_url`` parts in the same order, ``utils/middleware.py:2126-2142``). References (knowledge, notes,
    chats) get a line: Open WebUI retrieves their text itself, there is nothing to attach. ``images_in_content``
    False (the content came without the image parts Open WebUI adds, ``pipe.request_messages``): an image held in
    its ``data:`` URL comes back as the part Open WebUI would have made, with its name; an uploaded one is an upload
    to read like the others."""
    refs: list[FileRef] = []
    image_names: list[str | None] = []
    inline: list[tuple[dict[str, Any], str | None]] = []
    for item in files if isinstance(files, list) else []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        raw_name = item.get("name")
        name = raw_name if isinstance(raw_name, str) else None
        content_type = _mime(item.get("content_type"))
        image = kind == "image" or (kind == "file" and _raster(content_type))
        if image and images_in_content:
            if item.get("url"):  # the middleware adds a part only for a file with a url
                image_names.append(name)
            continue
        url = item.get("url")
        if image and isinstance(url, str) and url.startswith("data:"):
            inline.append(({"type": "image_url", "image_url": {"url": url}}, name))
            continue
        if kind != "file" and not image:
            if out is not None:
                what = _label(kind, "unknown")
                out.problem(f"{_label(name, 'An attachment')}: this kind of attachment ({what}) is not sent.")
            continue
        file_id = item.get("id")
        if not isinstance(file_id, str) or not _UUID.match(file_id):
            if out is not None:
                out.problem(f"{_label(name, 'A file')}: Open WebUI could not read this file, so it was not sent.")
            continue
        size = item.get("size")
        refs.append(
            FileRef(
                id=file_id,
                name=name or "file",
                content_type=content_type,
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            )
        )
    return refs, image_names, inline


def _data_url(url: str, limit: int) -> tuple[str, bytes] | object | None:
    """``(declared type, bytes)`` of a ``data:`` URL; ``_TOO_LARGE`` when its length alone shows it decodes to
    more than ``limit`` bytes (nothing is decoded then: a hostile part may be hundreds of MB); None if invalid."""
    url = url.strip()  # (the same string when there is nothing to strip: no copy)
    comma = url.find(",")
    if comma < 0:
        return None
    params = [p.strip() for p in url[5:comma].split(";")]
    is_base64 = len(params) > 1 and params[-1].lower() == "base64"
    declared = _mime(params[0])
    # Lower bounds of the decoded size, from the encoded text alone, before even the payload is copied out of the
    # URL: base64 may hold line breaks; a percent-encoded payload decodes to at least one byte per character,
    # less two per "%" (each %XX is one byte).
    encoded = len(url) - comma - 1
    if is_base64:
        least = (encoded * 3 // 4) * 64 // 65 - 2
    else:
        least = encoded - 2 * url.count("%", comma + 1)
    if least > limit:
        return _TOO_LARGE
    payload = url[comma + 1 :]
    if not is_base64:
        try:
            data = _unquote_bounded(payload, limit)
        except Exception:
            return None
        return _TOO_LARGE if data is None else (declared, data)
    data = _b64decode(payload)
    return None if data is None else (declared, data)


#: Characters of a percent-encoded payload decoded at once (``_unquote_bounded``).
_UNQUOTE_CHUNK: Final = 1 << 16


def _unquote_bounded(payload: str, limit: int) -> bytes | None:
    """A percent-encoded payload's bytes, or None as soon as they pass ``limit``. Decoded a slice at a time:
    ``urllib.parse.unquote_to_bytes`` makes two small objects per ``%XX`` and so cost 1.36 GB (tracemalloc
    peak) for an 18 MB payload of escapes, all in Open WebUI's process; a slice at a time it costs the output
    and one slice's objects (12 MB for the same payload). A slice never ends inside an escape."""
    out = bytearray()
    start, end = 0, len(payload)
    while start < end:
        stop = min(end, start + max(3, _UNQUOTE_CHUNK))  # (at least one whole escape)
        if stop < end:
            cut = payload.rfind("%", max(start, stop - 2), stop)
            if cut > start:
                stop = cut  # that escape goes whole into the next slice
        out += urllib.parse.unquote_to_bytes(payload[start:stop])
        if len(out) > limit:
            return None
        start = stop
    return bytes(out)


def _b64decode(text: str) -> bytes | None:
    """Standard or URL-safe base64, with or without padding and line breaks; None if it is neither."""
    try:
        raw = _WHITESPACE.sub(b"", text.encode("ascii"))
    except UnicodeEncodeError:
        return None
    if b"-" in raw or b"_" in raw:
        if b"+" in raw or b"/" in raw:
            return None
        raw = raw.translate(bytes.maketrans(b"-_", b"+/"))
    if len(raw) % 4 == 1:
        return None
    raw += b"=" * (-len(raw) % 4)
    if not _B64_ALPHABET.match(raw):
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None


def _sniff_image(data: bytes) -> str | None:
    """The image type the bytes start with (the signatures the Gateway's sniffer knows for these formats), or
    None. The Gateway decides what is an image this way, not by the declared type."""
    head = data[:32]
    for magic, mime in (
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"II*\x00", "image/tiff"),
        (b"MM\x00*", "image/tiff"),
        (b"8BPS", "image/vnd.adobe.photoshop"),
        (b"\xff\x0a", "image/jxl"),
        (b"\x00\x00\x00\x0cJXL \r\n\x87\n", "image/jxl"),
        (b"\x00\x00\x01\x00", "image/x-icon"),
        (b"BM", "image/bmp"),
    ):
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"avif", b"avis"):
            return "image/avif"
        if brand in (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx"):
            return "image/heic"
        if brand in (b"mif1", b"msf1"):
            return "image/heif"
    return None


def _image_extension(name: str) -> bool:
    suffix = os.path.splitext(name.lower())[1]
    return bool(suffix) and (suffix in _EXTENSIONS.values() or suffix in (".svg", ".jpeg", ".tif", ".jfif"))


def _raster(content_type: str) -> bool:
    """Open WebUI's ``is_raster_image_content_type`` (``utils/misc.py:1245-1248``): an image that is not SVG."""
    return content_type.startswith("image/") and content_type != "image/svg+xml"


def _mime(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    mime = value.split(";", 1)[0].strip().lower()
    return mime if len(mime) <= 127 and _MIME.match(mime) else ""


def _file_name(name: str | None, stem: str, mime: str | None) -> str:
    """A file name for the Gateway: the user's (single line, no folders), else ``stem`` and the type's
    extension. The Gateway takes the type from the bytes; the name is what the agent sees."""
    clean = _CONTROL.sub(" ", Path(name.replace("\\", "/")).name).strip() if isinstance(name, str) else ""
    clean = clean[:200]
    if clean and clean not in (".", ".."):
        return clean
    return stem + (_EXTENSIONS.get(mime, "") if mime else "")


def _label(value: Any, fallback: str) -> str:
    """A name fit for a line the user reads: one line, short; never the data itself."""
    if not isinstance(value, str):
        return fallback
    text = " ".join(_CONTROL.sub(" ", value).split())
    if not text:
        return fallback
    if text[:5].lower() == "data:":
        return fallback
    return text if len(text) <= _NAME_CHARS else text[: _NAME_CHARS - 1] + "…"


def _mb(n: int) -> str:
    """Bytes as the user reads them: ``6 MB``, ``18.6 MB`` (MiB, as the Gateway counts)."""
    text = f"{n / 1_048_576:.1f}".removesuffix(".0")
    return f"{text} MB"


__all__ = [
    "FRAME_RESERVE",
    "MAX_BYTES",
    "MAX_IMAGE_BYTES",
    "MAX_PAYLOAD",
    "FileReader",
    "FileRef",
    "attachments_from",
    "file_refs",
    "message_files",
    "owui_file_reader",
    "read_upload",
]
