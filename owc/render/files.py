"""How the files an agent made show in its reply. Pure.

Open WebUI 0.12.4's page shows an assistant message's ``files`` under the reply (``ResponseMessage.svelte``): an
entry of ``type: "image"`` inline through its ``Image`` component, one of ``type: "file"`` as a file chip
(``FileItem``: name, size, a click opens it). Each entry points at Open WebUI's own copy of the file
(``/api/v1/files/<id>/content``, served to its owner), so a reload, a second tab or a tab on another worker shows
it, and the Gateway's short-lived URLs are never kept. ``openclaw_artifact`` names the Gateway's artifact it came
from: the mark that keeps a file from being added twice (``tree.merge_files``).

A file that could not be kept is named in the message as one status line: the Gateway's own refusal
(``attachment_error``), a refusal of owc's policy, or a failure to fetch or store it. Never silently dropped.
"""

from __future__ import annotations

from typing import Any

from owc.protocol.media import DeliveredFile, RefusedFile

#: The Gateway's refusal codes (``attachment_error.code``, measured) in a reader's words.
GATEWAY_REFUSALS = {
    "unsupported-format": "the Gateway does not deliver files of this type",
    "file-not-found": "the Gateway did not find the file",
    "delivery-failed": "the Gateway could not prepare it (too large, or out of reach)",
}


def file_entry(item: DeliveredFile, file_id: str, url: str, mime: str, size: int) -> dict[str, Any]:
    """The ``files`` entry of a stored file."""
    return {
        "type": "image" if item.kind == "image" else "file",
        "id": file_id,
        "url": url,
        "name": item.label,
        "content_type": mime,
        "size": size,
        "openclaw_artifact": item.artifact_id,
    }


def _name(label: str) -> str:
    """A label as it shows in a line: printable, one line, bounded."""
    clean = "".join(c if c.isprintable() else "?" for c in label).strip() or "a file"
    return clean if len(clean) <= 80 else clean[:77] + "..."


def refused_line(item: RefusedFile) -> str:
    why = GATEWAY_REFUSALS.get(item.code, f"the Gateway refused it ({_name(item.code)})")
    return f"{_name(item.label)} was not delivered: {why}."


def note(line: str) -> dict[str, Any]:
    """A status line (Open WebUI's ``statusHistory`` entry) naming a file that is not in the reply."""
    return {"description": line, "done": True, "action": "openclaw_file"}
