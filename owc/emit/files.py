"""Where the files an agent makes are kept: the interface the media desk (``owc.runs.media``) stores through.

Inside Open WebUI it is Open WebUI's own file storage, in process (``owc.owui.files``: its storage provider and its
``file`` table, the file owned by the chat's user, served by Open WebUI's ``/api/v1/files/<id>/content``): no HTTP
call to itself, no server of owc's own, nothing listening. ``owc run`` outside Open WebUI has no file storage
(``NoFiles``): each file is named in its message as not stored, never dropped in silence. ``RecordingFiles`` keeps
them in memory for tests and benches.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Protocol

import attrs


@attrs.frozen
class StoredFile:
    """A file kept in Open WebUI's storage: its id and the URL a tab loads it from (same origin, the user's session
    authenticates it)."""

    file_id: str
    url: str


class FileRefused(Exception):
    """The storage would not keep the file; the message says why in a person's words (no path, no secret)."""


class FileSink(Protocol):
    async def store(self, user_id: str, name: str, mime: str, data: bytes, *, source: str) -> StoredFile:
        """Keep ``data`` as a file named ``name`` of type ``mime``, owned by ``user_id``. ``source`` names where it
        came from (the Gateway's artifact id), kept in the file's metadata. Raises ``FileRefused``."""


def content_url(file_id: str) -> str:
    """Open WebUI's URL of a stored file's bytes (``routers/files.py`` ``GET /{id}/content``)."""
    return f"/api/v1/files/{file_id}/content"


class NoFiles:
    """No file storage here (``owc run`` outside Open WebUI)."""

    #: Said in the message for each file.
    WHY = "owc runs outside Open WebUI here, so it has no file storage (run owc inside Open WebUI to keep files)"

    async def store(self, user_id: str, name: str, mime: str, data: bytes, *, source: str) -> StoredFile:
        raise FileRefused(self.WHY)


@attrs.define
class RecordingFiles:
    """Keeps every stored file in memory: ``files[file_id] = (user_id, name, mime, sha256, source)``."""

    files: dict[str, tuple[str, str, str, str, str]] = attrs.field(factory=dict)
    data: dict[str, bytes] = attrs.field(factory=dict)
    refuse: str | None = None

    async def store(self, user_id: str, name: str, mime: str, data: bytes, *, source: str) -> StoredFile:
        if self.refuse is not None:
            raise FileRefused(self.refuse)
        file_id = str(uuid.uuid4())
        self.files[file_id] = (user_id, name, mime, hashlib.sha256(data).hexdigest(), source)
        self.data[file_id] = data
        return StoredFile(file_id, content_url(file_id))
