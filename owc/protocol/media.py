"""Files the agent makes, as the Gateway delivers them in a run's transcript. Pure.

Measured on the real Gateway 2026.9.6 (``docs/measured/media-2026.9.6.md``): the Gateway itself recognizes a
standalone ``MEDIA:<ref>`` line (and a tool's structured media), checks the file against its own policy, copies it
into its **managed media** and rewrites the transcript message: its text without the ``MEDIA:`` lines, plus one
content block per file. So owc never reads a ``MEDIA:`` line, a ``mediaUrls`` list or a tool's ``mediaUrl`` as a
path: the files it takes are exactly these blocks, named by stable artifact ids.

* ``image``: ``{type:"image", artifactId:"artifact_managed_image_<uuid>", url, alt, mimeType, width, height,
  sizeBytes}``
* ``audio`` / ``video``: ``{type, artifactId:"artifact_managed_media_<uuid>", url, fileName, mimeType, sizeBytes}``
* document: ``{type:"attachment", attachment:{artifactId:"artifact_managed_media_<uuid>", url, kind:"document",
  label, mimeType, sizeBytes}}``
* refused by the Gateway: ``{type:"attachment_error", attachment:{code, kind, label, mimeType?}}`` with code
  ``unsupported-format | file-not-found | delivery-failed`` (never a path: the file's base name only).

A tool result's own image (``artifact_transcript_image_...``, e.g. ``read`` of a PNG) is the agent's input, not a
file it delivers: it is not taken. Everything here is read defensively (a hostile or newer payload never raises;
what is not a valid block is skipped)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from owc.protocol.results import ChatHistory, HistoryMessage, OtherPart

#: The prefixes of the Gateway's managed-media artifact ids: the only ids owc fetches.
MANAGED_PREFIXES = ("artifact_managed_image_", "artifact_managed_media_")
#: Bounds against a hostile payload, far above anything real.
MAX_ID_CHARS = 200
MAX_LABEL_CHARS = 500
MAX_FILES_PER_RUN = 64

#: Block type -> kind.
_KINDS = {"image": "image", "audio": "audio", "video": "video"}


@attrs.frozen
class DeliveredFile:
    """A file the Gateway delivered for a run: its artifact id (what ``artifacts.download`` takes), its kind
    (``image``, ``audio``, ``video``, ``document``), the name the Gateway gives it (a base name), the declared type
    and size (either may be missing: then unknown, never trusted as more than a bound)."""

    artifact_id: str
    kind: str
    label: str
    mime: str | None = None
    size: int | None = None


@attrs.frozen
class RefusedFile:
    """A file the Gateway would not deliver (``attachment_error``): named in the message, never dropped silently."""

    code: str
    kind: str
    label: str
    mime: str | None = None


MediaItem = DeliveredFile | RefusedFile


def _text(d: Mapping[str, Any], key: str, cap: int) -> str | None:
    value = d.get(key)
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value[:cap] if value else None


def _size(d: Mapping[str, Any]) -> int | None:
    value = d.get("sizeBytes")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _artifact(d: Mapping[str, Any]) -> str | None:
    artifact = _text(d, "artifactId", MAX_ID_CHARS)
    if artifact is None or not artifact.startswith(MANAGED_PREFIXES):
        return None
    if not all(c.isalnum() or c in "_-" for c in artifact):
        return None  # an id owc passes back to the Gateway: nothing but what the Gateway's own ids hold
    return artifact


def media_of_block(block: Mapping[str, Any]) -> MediaItem | None:
    """One transcript content block as a delivered or refused file; None for anything else."""
    kind = block.get("type")
    if kind in _KINDS:
        artifact = _artifact(block)
        if artifact is None:
            return None
        label = _text(block, "alt", MAX_LABEL_CHARS) or _text(block, "fileName", MAX_LABEL_CHARS) or kind
        return DeliveredFile(artifact, _KINDS[kind], label, _text(block, "mimeType", MAX_LABEL_CHARS), _size(block))
    inner = block.get("attachment")
    if not isinstance(inner, Mapping):
        return None
    declared = _text(inner, "kind", 40) or "document"
    label = _text(inner, "label", MAX_LABEL_CHARS) or _text(inner, "fileName", MAX_LABEL_CHARS) or "file"
    if kind == "attachment":
        artifact = _artifact(inner)
        if artifact is None:
            return None
        file_kind = declared if declared in ("image", "audio", "video") else "document"
        return DeliveredFile(artifact, file_kind, label, _text(inner, "mimeType", MAX_LABEL_CHARS), _size(inner))
    if kind == "attachment_error":
        code = _text(inner, "code", 60) or "delivery-failed"
        return RefusedFile(code, declared, label, _text(inner, "mimeType", MAX_LABEL_CHARS))
    return None


def media_of_message(message: HistoryMessage) -> tuple[MediaItem, ...]:
    """The files one transcript message holds, in order."""
    out: list[MediaItem] = []
    for part in message.parts:
        if isinstance(part, OtherPart) and isinstance(part.raw, Mapping):
            item = media_of_block(part.raw)
            if item is not None:
                out.append(item)
    return tuple(out)


def run_media(history: ChatHistory, run_id: str) -> tuple[MediaItem, ...]:
    """The files of run R: those in R's own assistant messages, in transcript order, each artifact once (the
    Gateway merges duplicates itself; a message shown as two display rows repeats its blocks). Bounded."""
    return dedup(
        item
        for m in history.messages
        if m.role == "assistant" and m.assistant_run_id == run_id
        for item in media_of_message(m)
    )


def dedup(items: Iterable[MediaItem]) -> tuple[MediaItem, ...]:
    seen: set[object] = set()
    out: list[MediaItem] = []
    for item in items:
        key = item.artifact_id if isinstance(item, DeliveredFile) else ("refused", item.code, item.label)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= MAX_FILES_PER_RUN:
            break
    return tuple(out)


def announces_media(data: Mapping[str, Any]) -> bool:
    """An ``agent`` ``assistant`` stream's data says files are coming (``mediaUrls``, the raw references the model
    wrote: measured). Only *that* they come, never which: the list is never read as paths."""
    urls = data.get("mediaUrls")
    return isinstance(urls, list) and any(isinstance(u, str) and u for u in urls)
